"""Runtime adapters: the same two calls for every backend, load(artifact, threads, config) -> Session
and session.run(inputs) -> outputs. Each adapter is imported only by the process that uses it.

`config` is the runtime configuration a build recorded (for example OpenVINO's inference
precision hint), so that an artifact is always run the way it was built to run.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.runtimes.base import Session


@dataclass(frozen=True)
class Runtime:
    module: str
    packages: tuple[str, ...]  # import names that must be installed
    distribution: str  # the installed package whose version a deployment records
    device: str = "cpu"


RUNTIMES: dict[str, Runtime] = {
    "onnxruntime": Runtime("pipeline.runtimes.ort", ("onnxruntime",), "onnxruntime"),
    "torch": Runtime("pipeline.runtimes.torch_rt", ("torch",), "torch"),
    "openvino": Runtime("pipeline.runtimes.ov", ("openvino",), "openvino"),
    "tensorflow": Runtime("pipeline.runtimes.tf_rt", ("tensorflow",), "tensorflow-cpu"),
    "jax": Runtime("pipeline.runtimes.jax_rt", ("jax", "flax"), "jax"),
}


def unavailable_reason(name: str) -> str | None:
    """Why runtime `name` cannot run on this machine, or None when it can."""
    missing = [p for p in RUNTIMES[name].packages if importlib.util.find_spec(p) is None]
    return f"{', '.join(missing)} is not installed" if missing else None


def load(name: str, artifact: Path, threads: int, config: dict[str, Any] | None = None) -> Session:
    """Load an artifact (the file or folder its build recorded as entry) with runtime `name`."""
    return importlib.import_module(RUNTIMES[name].module).load(artifact, threads, config or {})
