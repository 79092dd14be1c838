"""A model's own code, named 'module:attr' in params.yaml: found under a code root (the project
root, or the copy a deploy folder carries) by the sources, the runtimes and the training stage alike."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

from pipeline.core.errors import ConfigError
from pipeline.core.layout import PARAMS_FILE


def import_object(reference: str, root: Path, field: str) -> Any:
    """Import 'module:attr' with the project root first on sys.path, so models/ code is found."""
    module_name, _, attr = reference.partition(":")
    root_str = str(root.resolve())
    if root_str not in sys.path:
        sys.path.insert(0, root_str)
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ConfigError(f"{PARAMS_FILE}: {field}: cannot import {module_name!r} ({error})") from None
    target: Any = module
    for part in attr.split("."):
        if not hasattr(target, part):
            raise ConfigError(f"{PARAMS_FILE}: {field}: {module_name!r} has no attribute {attr!r}")
        target = getattr(target, part)
    return target


def as_list(result: Any) -> list[Any]:
    if isinstance(result, dict):
        return list(result.values())
    if isinstance(result, list | tuple):
        return list(result)
    return [result]
