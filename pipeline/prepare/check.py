"""`python -m pipeline check`: find what `dvc repro` would stumble on, before any stage runs.

params.yaml is validated as a whole (pipeline.core.config, and each variant's knobs by its pass:
pipeline.optimize.knobs, which the command runs before this); then every model that `models` lists has
its files opened: an ONNX file is checked (by path, so external weights count) and its inputs
compared with the spec, data files are read and checked against the spec, other model files must
exist, and a `factory` is imported (its module and name; it is not called, so no model is built).
Each problem is one line naming the file and the params.yaml field.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from pipeline.core.config import PARAMS_FILE, Params
from pipeline.core.errors import ConfigError, PipelineError, first_line
from pipeline.core.inputs import load_user_data
from pipeline.core.layout import model_dir
from pipeline.core.registry import SOURCES

TRAINED = "trained"  # the train stage's output folder inside models/<name>/ (dvc.yaml)


def check_model(name: str, params: Params, root: Path = Path(".")) -> dict[str, int]:
    """Raise the first problem with model `name`'s files, as a PipelineError; the values its symbolic
    dimensions take (the catalog's `dims`, else its data's)."""
    from pipeline.prepare.export import resolve_dims

    config = params.model(name)
    folder = model_dir(name, root)
    if name in params.train and not (folder / TRAINED).exists():
        return dict(config.dims)  # an embedded zoo model: the train stage writes its files
    if config.factory:
        check_factory(config.factory, root, f"catalog.{name}.factory")
    if config.file:
        path = folder / config.file
        if not path.exists():
            raise PipelineError(f"{path}: not found ({PARAMS_FILE}: catalog.{name}.file)")
        if (source := SOURCES[config.source]).checks_file and source.loader:  # the kind's own look inside its file
            importlib.import_module(source.loader).check_file(path, config, f"catalog.{name}")
    evaluation = None
    for field in ("eval_data", "calib_data"):
        relative = getattr(config, field)
        if relative:
            data = load_user_data(folder / relative, config.inputs, f"catalog.{name}.{field}")
            evaluation = evaluation or data
    return resolve_dims(name, config, evaluation)


def check_factory(reference: str, root: Path, field: str) -> None:
    """Import the factory's module and find its name, as the export stage will."""
    from pipeline.core.model_code import import_object

    try:
        import_object(reference, root, field)
    except PipelineError:
        raise
    except Exception as error:  # the module itself fails to import (syntax, a missing package)
        raise ConfigError(f"{PARAMS_FILE}: {field}: importing {reference!r} failed: {first_line(error)}") from None


def check_models(params: Params, root: Path = Path(".")) -> list[str]:
    """One line per model with a problem (empty: all fine)."""
    problems = []
    for name in params.models:
        try:
            check_model(name, params, root)
        except PipelineError as error:
            problems.append(str(error))
    return problems
