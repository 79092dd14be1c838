"""`add`'s all-or-nothing write: the model's folder built aside and moved in, params.yaml's new text
written beside it, both checked as `python -m pipeline check` would (a factory built, its weights
loaded; an ONNX file loaded, its outputs' rows found), the weights versioned with `dvc add`, and only
then params.yaml replaced in one rename; a failure at any step removes what was made."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from pipeline.core.config import PARAMS_FILE, load_params
from pipeline.core.errors import ModelFileError, PipelineError
from pipeline.core.layout import MODELS, model_dir
from pipeline.core.registry import SOURCES
from pipeline.prepare.add.eval_data import EVAL_FILE
from pipeline.prepare.add.inferred import AddError, Inferred
from pipeline.prepare.add.params_text import with_entry


def write_model(name: str, inferred: Inferred, root: Path) -> list[str]:
    """models/NAME/ and NAME's entry in params.yaml written, checked and versioned, or nothing; the
    .dvc files `dvc add` wrote."""
    params_path = root / PARAMS_FILE
    folder = model_dir(name, root)
    staging = folder.with_name(f".{name}.add-tmp")
    new_params = params_path.with_name(f".{PARAMS_FILE}.add-tmp")
    try:
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        for target, source in inferred.files.items():
            (shutil.copytree if source.is_dir() else shutil.copy2)(source, staging / target)
        os.rename(staging, folder)
        new_params.write_text(with_entry(params_path.read_text(), name, inferred.entry.as_yaml()))
        inferred.notes += [note for note in check(name, new_params, root) if note not in inferred.notes]
        tracked = track(folder, inferred.tracked + _large(folder, EVAL_FILE), root)
        os.replace(new_params, params_path)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(folder, ignore_errors=True)
        new_params.unlink(missing_ok=True)
        raise
    return tracked


def check(name: str, params_file: Path, root: Path) -> list[str]:
    """The new params.yaml validated and the model's files opened against its entry (as `check` does);
    a factory or a file loaded where its kind says so (registry.SOURCES' loaded_at_add): what loading found to tell."""
    from pipeline.prepare.check import check_model

    try:
        params = load_params(params_file)
    except PipelineError as error:
        raise AddError(str(error).replace(params_file.name, PARAMS_FILE)) from None
    dims = check_model(name, params, root)
    config = params.model(name)
    if not SOURCES[config.source].loaded_at_add:
        return [] if config.generates else [READ_AT_EXPORT.format(name=name)]
    import importlib

    from pipeline.prepare.add.judging import readings
    from pipeline.prepare.sources import load_source

    importlib.invalidate_caches()  # models/NAME/ is new to this process's import system
    source = load_source(name, config, root, dims)
    return source.notes + readings(source, config, model_dir(name, root))


READ_AT_EXPORT = ("its outputs' readings are found at export, from the source's values on the eval rows: "
                  "`python -m pipeline summary {name}` lists them; --judged-as OUT=KIND sets one")  # fmt: skip


def _large(folder: Path, file: str) -> list[str]:
    """`file` when it is present and over a megabyte: eval data that size goes to DVC too."""
    path = folder / file
    return [file] if path.exists() and path.stat().st_size > 1_000_000 else []


def track(folder: Path, files: list[str], root: Path) -> list[str]:
    """`dvc add` the model's files: git keeps a small .dvc file and a .gitignore entry for each."""
    paths = [f"{MODELS}/{folder.name}/{file}" for file in files]
    if not paths:  # code alone (no weights file): git keeps it
        return []
    done = subprocess.run(["dvc", "add", "-q", *paths], cwd=root, capture_output=True, text=True)
    if done.returncode:
        error = (done.stderr or done.stdout).strip().splitlines()
        raise ModelFileError(f"{folder}: `dvc add` failed: {error[-1] if error else done.returncode}")
    return [f"{p}.dvc" for p in paths]
