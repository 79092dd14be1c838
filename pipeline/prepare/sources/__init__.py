"""Source models: load what the user trained, give reference outputs, export to ONNX.

One module per source kind, imported only when a model of that kind is used.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from pipeline.core.config import ModelConfig
from pipeline.prepare.sources.base import SourceModel

SOURCE_MODULES = {
    "torch": "pipeline.prepare.sources.pytorch",
    "onnx": "pipeline.prepare.sources.onnxfile",
    "keras": "pipeline.prepare.sources.tfkeras",
    "savedmodel": "pipeline.prepare.sources.tfkeras",
    "jax": "pipeline.prepare.sources.jaxfn",
}


def load_source(
    name: str, config: ModelConfig, root: Path = Path("."), dims: dict[str, int] | None = None
) -> SourceModel:
    """Load model `name` of the catalog with the module for its source kind; `dims` gives the
    symbolic dimensions their values (default: the catalog's `dims`)."""
    module = importlib.import_module(SOURCE_MODULES[config.source])
    return module.load(name, config, root, dims)
