"""Build variants with the pipeline's own code in a scratch project, for benchmark scripts.

The scripts measure models that the default `dvc repro` does not build (ResNet-50) and must not
touch the workspace's DVC outputs, so they export and build into a temporary copy instead.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import yaml

from pipeline.build.stage import build_variant
from pipeline.ci.remeasure import latency_in_fresh_process  # noqa: F401  (re-exported for the scripts)
from pipeline.core import layout
from pipeline.core.config import PARAMS_FILE, load_params, model_dir
from pipeline.core.files import read_json
from pipeline.core.isolate import call
from pipeline.prepare.export import export_model

REPO = Path(__file__).resolve().parents[1]


def scratch_project(model: str, variants: list[str], overrides: dict[str, Any] | None = None) -> Path:
    """A temporary project with the repository's params (plus `overrides`) and `model`'s folder,
    its export and the given variants built. Zoo models must have been trained (`dvc repro`)."""
    root = Path(tempfile.mkdtemp(prefix=f"scratch-{model}-"))
    params = yaml.safe_load((REPO / PARAMS_FILE).read_text())
    params["models"] = [model]
    for section, values in (overrides or {}).items():
        params[section] = params.get(section, {}) | values
    (root / PARAMS_FILE).write_text(yaml.safe_dump(params, sort_keys=False))
    (root / "models").mkdir()
    shutil.copy(REPO / "models" / "__init__.py", root / "models")
    shutil.copytree(model_dir(model, REPO), model_dir(model, root), ignore=shutil.ignore_patterns("__pycache__"))
    report = call("benchmarks.scratch:export_in", {"model": model, "root": str(root)}, timeout=1800)
    if report["status"] != "ok":
        raise RuntimeError(f"export of {model} failed: {report['reason']}")
    loaded = load_params(root / PARAMS_FILE)
    for variant in variants:
        info = build_variant(model, variant, loaded, root)
        if info["status"] != "ok":
            raise RuntimeError(f"{model}/{variant}: {info['status']}: {info['reason']}")
    return root


def export_in(model: str, root: str) -> dict[str, Any]:
    """The export stage in a process of its own: each scratch project imports its own `models`."""
    return export_model(model, load_params(Path(root) / PARAMS_FILE), Path(root))


def entry(root: Path, model: str, variant: str) -> tuple[Path, dict[str, Any]]:
    """The built file of a variant and its runtime configuration."""
    folder = layout.variant_dir(model, variant, root)
    build = read_json(folder / layout.BUILD_INFO)
    return folder / build["entry"], build
