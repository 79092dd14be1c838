"""Runtime adapters: the same two calls for every backend, load(artifact, threads, config, target)
-> Session and session.run(inputs) -> outputs. Each adapter is imported only by the process that uses it.

`config` is the runtime configuration a build recorded (for example OpenVINO's inference
precision hint, or ONNX Runtime's execution provider), so that an artifact is always run the way
it was built to run, typed by the adapter's own `Config`; `target` is where (cpu, cuda:N:
pipeline.core.targets). Each adapter also types what its sessions report (`Details`).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import Any

from pipeline.core.records.build import RuntimeConfig
from pipeline.core.registry import RUNTIMES
from pipeline.runtimes.base import Session


def load(
    name: str, artifact: Path, threads: int, config: RuntimeConfig | dict[str, Any] | None = None, target: str = "cpu"
) -> Session:
    """Load an artifact (the file or folder its build recorded as entry) with runtime `name` on `target`;
    `config` is its build's runtime config (a dict: as a pass returns it)."""
    from pipeline.runtimes.layout import in_layout

    adapter = importlib.import_module(RUNTIMES[name].module)
    settings = typed(adapter, config)
    return in_layout(adapter.load(artifact, threads, settings, target), settings)


def typed(adapter: ModuleType, config: RuntimeConfig | dict[str, Any] | None) -> RuntimeConfig:
    """A build's runtime config as the adapter module types its keys (its `Config`): a key it does not read is an
    error naming it."""
    return adapter.Config.model_validate(config.as_dict() if isinstance(config, RuntimeConfig) else config or {})
