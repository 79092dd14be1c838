"""Source models: load what the user trained, give reference outputs, export to ONNX.

One module per source kind, imported only when a model of that kind is used.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from pipeline.core.config import ModelConfig
from pipeline.core.registry import SOURCES
from pipeline.prepare.sources.base import SourceModel

# The loader of each source kind, from the registry (pipeline.core.registry.SOURCES); a decoder's
# Hugging Face folder (source: transformers) has none: pipeline.prepare.decoder exports it.
SOURCE_MODULES = {kind: source.loader for kind, source in SOURCES.items() if source.loader}


def load_source(
    name: str, config: ModelConfig, root: Path = Path("."), dims: dict[str, int] | None = None
) -> SourceModel:
    """Load model `name` of the catalog with the module for its source kind; `dims` gives the
    symbolic dimensions their values (default: the catalog's `dims`)."""
    module = importlib.import_module(SOURCE_MODULES[config.source])
    return module.load(name, config, root, dims)
