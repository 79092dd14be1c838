"""Reading the pipeline's results back: metrics files and the recorded selection."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline import layout
from pipeline.files import read_json


def load_env(root: Path = Path(".")) -> dict[str, Any]:
    """The machine fingerprint the numbers belong to (reports/env.json); {} before the env stage ran."""
    path = layout.env_file(root)
    return read_json(path) if path.exists() else {}


def load_metrics(model: str, root: Path = Path(".")) -> dict[str, dict[str, Any]]:
    """Metrics of every variant of `model` that has a file, keyed by variant name."""
    folder = layout.metrics_dir(root) / model
    return {p.stem: read_json(p) for p in sorted(folder.glob("*.json"))} if folder.is_dir() else {}
