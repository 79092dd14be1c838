"""Build variants with the pipeline's own code in a scratch project, for benchmark scripts.

The scripts measure models that the default `dvc repro` does not build (a Hugging Face encoder, a
recipe grid) and must not touch the workspace's DVC outputs, so they export and build into a
temporary copy instead.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import yaml

from benchmarks.smoke import SMOKE_SETTINGS, merged
from pipeline.core import layout
from pipeline.core.config import PARAMS_FILE, load_params
from pipeline.core.isolate import call
from pipeline.core.layout import model_dir
from pipeline.core.records import build as build_record
from pipeline.core.records import source as source_record
from pipeline.core.records.build import BuildRecord
from pipeline.optimize.stage import build_variant
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
        if not info.ok:
            raise RuntimeError(f"{model}/{variant}: {info.status}: {info.reason}")
    return root


def added_project(name: str, folder: Path, text: list[str], seq: int, smoke: bool = False) -> Path:
    """A temporary DVC project (no git) holding Hugging Face encoder `folder` added by `add` as a
    user does (pipeline.prepare.add: feature extraction, `text` as its eval data at `seq` tokens),
    exported; no variant built. `smoke`: with SMOKE_SETTINGS."""
    from pipeline.prepare.add.command import add_model
    from pipeline.prepare.add.flags import Flags

    root = Path(tempfile.mkdtemp(prefix=f"scratch-{name}-"))
    params = yaml.safe_load((REPO / PARAMS_FILE).read_text())
    params["models"] = params["models"][:1]  # params.yaml lists one model at least: `add` appends, then only it
    (root / PARAMS_FILE).write_text(yaml.safe_dump(params, sort_keys=False))
    (root / "models").mkdir()
    shutil.copy(REPO / "models" / "__init__.py", root / "models")
    subprocess.run(["dvc", "init", "--no-scm", "-q"], cwd=root, check=True)
    (root / "text.txt").write_text("\n".join(text) + "\n")
    with contextlib.chdir(root):  # the project's paths are relative to its root, as for a user
        add_model(name, folder, root, Flags(eval=root / "text.txt", dims={"seq": seq}, task="feature-extraction"))
    params = yaml.safe_load((root / PARAMS_FILE).read_text()) | {"models": [name]}
    for section, values in SMOKE_SETTINGS.items() if smoke else ():
        params[section] = merged(params.get(section) or {}, values)
    (root / PARAMS_FILE).write_text(yaml.safe_dump(params, sort_keys=False))
    report = call("benchmarks.scratch:export_in", {"model": name, "root": str(root)}, timeout=1800)
    if report["status"] != "ok":
        raise RuntimeError(f"export of {name} failed: {report['reason']}")
    return root


def export_in(model: str, root: str) -> dict[str, Any]:
    """The export stage in a process of its own, run from the project's root as DVC runs it (each
    scratch project imports its own `models`; paths in params.yaml are the project's)."""
    os.chdir(root)
    return export_model(model, load_params(Path(root) / PARAMS_FILE), Path(root))


def entry(root: Path, model: str, variant: str) -> tuple[Path, BuildRecord]:
    """The built file of a variant and its build record (with the runtime configuration)."""
    folder = layout.variant_dir(model, variant, root)
    build = build_record.load(folder)
    return folder / build.entry, build


def fidelity_on(root: str, model: str, variant: str, row_files: list[str]) -> dict[str, Any]:
    """A built variant's fidelity block against the FP32 source on each of the source's saved row sets
    (layout.REFERENCE: the scoring rows; layout.VALIDATION), and its runtime's details; one session.
    Benchmarks run it in a process of its own (pipeline.core.isolate.call)."""
    from pipeline import runtimes
    from pipeline.core.data import DataSet, run_batched
    from pipeline.core.evaluate import fidelity_block

    path, build = entry(Path(root), model, variant)
    session = runtimes.load(build.runtime, path, 1, build.runtime_config)
    source = layout.source_dir(model, Path(root))
    fixed = source_record.load(model, Path(root)).fixed_batch  # a file that fixes its batch runs at it
    found = {}
    for name in row_files:
        rows = DataSet.load(source / name)
        outputs = run_batched(session.run, rows.inputs, fixed or 32, fixed=bool(fixed))
        found[name] = fidelity_block(rows.outputs, outputs, None)
    return {"fidelity": found, "runtime": session.details()}
