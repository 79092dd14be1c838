"""Runtime adapters: the same two calls for every backend, load(artifact, threads, config, target)
-> Session and session.run(inputs) -> outputs. Each adapter is imported only by the process that uses it.

`config` is the runtime configuration a build recorded (for example OpenVINO's inference
precision hint, or ONNX Runtime's execution provider), so that an artifact is always run the way
it was built to run; `target` is where (cpu, cuda:N: pipeline.targets).
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
    devices: tuple[str, ...] = ("cpu",)  # target kinds its adapter can run on


RUNTIMES: dict[str, Runtime] = {
    "onnxruntime": Runtime("pipeline.runtimes.ort", ("onnxruntime",), "onnxruntime", ("cpu", "cuda")),
    "torch": Runtime("pipeline.runtimes.torch_rt", ("torch",), "torch", ("cpu", "cuda")),
    "tensorrt": Runtime("pipeline.runtimes.trt", ("tensorrt", "cuda.bindings"), "tensorrt", ("cuda",)),
    "openvino": Runtime("pipeline.runtimes.ov", ("openvino",), "openvino"),
    "tensorflow": Runtime("pipeline.runtimes.tf_rt", ("tensorflow",), "tensorflow-cpu"),
    "jax": Runtime("pipeline.runtimes.jax_rt", ("jax", "flax"), "jax"),
}


def unavailable_reason(name: str, target: str = "cpu") -> str | None:
    """Why runtime `name` cannot run on `target` on this machine, or None when it can.

    On a GPU the adapter's own `unavailable_on(target)` asks the framework (a CPU-only build of
    torch, onnxruntime without its CUDA provider)."""
    runtime = RUNTIMES[name]
    missing = [p for p in runtime.packages if _missing(p)]
    if missing:
        return f"{', '.join(missing)} is not installed" + (" (pip install -e '.[gpu]')" if target != "cpu" else "")
    kind = target.partition(":")[0]
    if kind not in runtime.devices:
        return f"the {name} adapter runs on {', '.join(runtime.devices)}, not {kind}"
    return None if kind == "cpu" else importlib.import_module(runtime.module).unavailable_on(target)


def _missing(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is None
    except ModuleNotFoundError:  # a dotted name whose parent package is absent
        return True


def load(name: str, artifact: Path, threads: int, config: dict[str, Any] | None = None, target: str = "cpu") -> Session:
    """Load an artifact (the file or folder its build recorded as entry) with runtime `name` on `target`."""
    return importlib.import_module(RUNTIMES[name].module).load(artifact, threads, config or {}, target)
