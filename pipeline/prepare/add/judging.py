"""How `add` says a model is judged: the task metric (`--metric`: a built-in name, or FILE.py:FUNCTION of
the user's, copied into models/NAME/ as a factory is and named in the entry as one), the kind of an output
whose values cannot tell (`--judged-as NAME=KIND`) and where an output's probabilities are read
(`--threshold NAME=V`); each checked here in one line, and said in what `add` prints."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import get_args

from pipeline.core.config import BUILT_IN_METRICS, OutputKindName
from pipeline.core.errors import first_line
from pipeline.prepare.add.flags import Flags
from pipeline.prepare.add.inferred import AddError, Inferred


def metric_of(name: str, metric: str | None, inferred: Inferred) -> str | None:
    """The entry's `metric`: a built-in as it is, or FILE.py:FUNCTION copied into the model's folder and
    named `models.NAME.FILE:FUNCTION`, after checking that the file defines that function."""
    if metric is None or metric in BUILT_IN_METRICS:
        return metric
    file_name, _, function = metric.rpartition(":")
    path = Path(file_name).resolve()
    if not file_name.endswith(".py") or not function.isidentifier():
        raise AddError(f"--metric {metric}: expected one of {', '.join(BUILT_IN_METRICS)} or FILE.py:FUNCTION")
    if not path.is_file():
        raise AddError(f"--metric {metric}: {path}: file not found")
    try:
        spec = importlib.util.spec_from_file_location(f"_metric_{path.stem}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except Exception as error:
        raise AddError(
            f"--metric {metric}: {path} does not import ({type(error).__name__}: {first_line(error)})"
        ) from None
    if not callable(getattr(module, function, None)):
        raise AddError(f"--metric {metric}: {path} defines no function {function!r}")
    if path.name in inferred.files:
        raise AddError(f"--metric {metric}: {path.name} is also the model's own file: rename the metric's file")
    inferred.files[path.name] = path
    direction = "higher" if getattr(getattr(module, function), "higher_is_better", True) else "lower"
    inferred.notes.append(f"metric: {function} from {path.name} (copied beside the model; {direction} is better): "
                          "it judges every output, on the labelled eval rows")  # fmt: skip
    return f"models.{name}.{path.stem}:{function}"


def with_judging(inferred: Inferred, flags: Flags) -> None:
    """--judged-as and --threshold into the entry, each named output checked against the model's outputs
    where `add` knows them."""
    kinds = get_args(OutputKindName)
    for output, kind in flags.judged_as.items():
        if kind not in kinds:
            raise AddError(f"--judged-as {output}={kind}: the kind is one of {', '.join(kinds)}")
    for output, threshold in flags.thresholds.items():
        if not 0 < threshold < 1:
            raise AddError(f"--threshold {output}={threshold:g}: a threshold lies between 0 and 1")
    known = inferred.entry.outputs or inferred.output_names
    for output in [*flags.judged_as, *flags.thresholds]:
        if known and output not in known:
            raise AddError(f"--judged-as/--threshold {output}: no such output (outputs: {', '.join(known)})")
    if flags.judged_as:
        inferred.entry.judged_as = dict(flags.judged_as)
        inferred.notes += [f"output {o!r} judged as {k} (--judged-as)" for o, k in flags.judged_as.items()]
    if flags.thresholds:
        inferred.entry.decision_threshold = dict(flags.thresholds)
        inferred.notes += [f"output {o!r}: decisions read at {t:g} (--threshold)" for o, t in flags.thresholds.items()]
