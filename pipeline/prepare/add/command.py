"""The `add` entry the CLI calls: NAME checked free, PATH inspected (pipeline.prepare.add.inspect), the
`--eval` rows read into the entry (eval_data), the whole written or nothing (transaction), and what
`add` prints (describe)."""

from __future__ import annotations

import shutil
from pathlib import Path

from pipeline.core.config import PARAMS_FILE, load_params
from pipeline.core.layout import MODELS, model_dir
from pipeline.prepare.add.axes import NAME
from pipeline.prepare.add.eval_data import with_eval
from pipeline.prepare.add.flags import Flags
from pipeline.prepare.add.inferred import AddError, Inferred
from pipeline.prepare.add.inspect import inspect_model
from pipeline.prepare.add.judging import metric_of, with_judging
from pipeline.prepare.add.params_text import entry_lines
from pipeline.prepare.add.transaction import write_model


def add_model(name: str, path: Path, root: Path = Path("."), flags: Flags | None = None) -> Inferred:
    """Add model `name` from `path` to the project at `root` (pipeline.prepare.add says what it does)."""
    flags = flags or Flags()
    params = load_params(root / PARAMS_FILE)
    if not NAME.fullmatch(name):
        raise AddError(f"{name!r}: a model name is letters, digits and '_', not starting with a digit")
    folder = model_dir(name, root)
    if name in params.catalog or folder.exists():
        where = f"{PARAMS_FILE}: catalog.{name}" if name in params.catalog else str(folder)
        raise AddError(f"{name}: the name is taken ({where}): choose another")
    inferred = inspect_model(name, path.resolve(), flags)
    try:
        metric = metric_of(name, flags.metric, inferred)
        if flags.eval is not None:
            with_eval(inferred, flags.eval.resolve(), metric, flags.dims)
        elif metric is not None:
            raise AddError(f"--metric {flags.metric}: a task metric needs labelled eval data (--eval)")
        with_judging(inferred, flags)
        specs = inferred.entry.inputs or {}
        if unset := [n for n, spec in specs.items() if not spec.shape and spec.value is None]:
            raise AddError(f"{path}: input {unset[0]!r} is a scalar (shape []): give the value every call passes "
                           f"with --value {unset[0]}=V, or eval data that holds it")  # fmt: skip
        tracked = write_model(name, inferred, root)
    finally:
        for scratch in inferred.scratch:
            shutil.rmtree(scratch, ignore_errors=True)
    if tracked:
        inferred.notes.append(f"versioned with dvc add: {', '.join(tracked)} (git gets the .dvc files)")
    return inferred


def describe(name: str, inferred: Inferred) -> str:
    """What `add` prints: the entry, what it inferred, and the one command to run."""
    lines = [f"added {name} to {PARAMS_FILE} (catalog and models) and {MODELS}/{name}/:"]
    lines += entry_lines(name, inferred.entry.as_yaml())
    lines += [f"  - {note}" for note in inferred.notes]
    lines.append(f"run it: dvc repro   (then: python -m pipeline summary {name})")
    return "\n".join(lines)
