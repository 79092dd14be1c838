"""How `add` says a model is judged: the task metric (`--metric`: a built-in name, or FILE.py:FUNCTION of
the user's, copied into models/NAME/ as a factory is and named in the entry as one), the reading of an output
whose values and name cannot tell (`--judged-as NAME=KIND`), where an output's probabilities or logits are read
(`--threshold NAME=V`) and how far a point may move (`--tolerance NAME=V`), each checked here in one line; and
each output's reading, found on the eval rows as the variants will be judged (readings), said in what `add`
prints."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING, get_args

from pipeline.core.config import BUILT_IN_METRICS, OutputKindName
from pipeline.core.errors import first_line
from pipeline.core.readings import READINGS
from pipeline.prepare.add.flags import Flags
from pipeline.prepare.add.inferred import AddError, Inferred

if TYPE_CHECKING:
    from pipeline.core.config import ModelConfig
    from pipeline.prepare.sources.base import SourceModel

READ_ROWS = 64  # eval rows run to find each output's reading


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
    for output, tolerance in flags.tolerances.items():
        if not tolerance > 0:
            raise AddError(f"--tolerance {output}={tolerance:g}: a tolerance is a distance above 0")
    known = inferred.entry.outputs or inferred.output_names
    for output in [*flags.judged_as, *flags.thresholds, *flags.tolerances]:
        if known and output not in known:
            raise AddError(
                f"--judged-as/--threshold/--tolerance {output}: no such output (outputs: {', '.join(known)})"
            )
    if flags.judged_as:
        inferred.entry.judged_as = dict(flags.judged_as)
        inferred.notes += [f"output {o!r} judged as {k} (--judged-as)" for o, k in flags.judged_as.items()]
    if flags.thresholds:
        inferred.entry.decision_threshold = dict(flags.thresholds)
        inferred.notes += [f"output {o!r}: decisions read at {t:g} (--threshold)" for o, t in flags.thresholds.items()]
    if flags.tolerances:
        inferred.entry.point_tolerance = dict(flags.tolerances)
        inferred.notes += [f"output {o!r}: a point may move {t:g} (--tolerance)" for o, t in flags.tolerances.items()]


def readings(source: SourceModel, config: ModelConfig, folder: Path) -> list[str]:
    """One line per output: what it is read as and how that was found (pipeline.core.readings.detect),
    from the source run on up to READ_ROWS eval rows (generated rows without them), and the flag that
    changes it. An output no reading fits says so: it is judged by its cosine and its largest error."""
    from pipeline.core.data import run_batched, sample_batch
    from pipeline.core.evaluate import Judging
    from pipeline.core.inputs import load_user_data
    from pipeline.core.onnx_files import file_producers

    if config.eval_data:
        rows = load_user_data(folder / config.eval_data, config.inputs, "--eval").inputs
        rows, what = sample_batch(rows, min(READ_ROWS, len(next(iter(rows.values()))))), "eval rows"
    else:
        rows, what = source.example(8), "generated rows (no --eval: a reading from them is a guess)"
    try:
        outputs = run_batched(source.predict, rows, config.fixed_batch or READ_ROWS, config.fixed_batch is not None)
    except Exception as error:
        return [f"its outputs' readings are found at export: running it on the {what} here failed "
                f"({type(error).__name__}: {first_line(error)})"]  # fmt: skip
    judging, lines = Judging.of(config, file_producers(source.path)), []  # an ONNX file's graph; others' at export
    for i, (name, values) in enumerate(outputs.items()):
        kind, how = judging.kind(i, name, values)
        fallback = READINGS[kind].fallback
        found = f"output {name!r}{'' if fallback else f' read as {kind}'}: {how} (on {len(values)} {what})"
        found += READINGS[kind].note(name, values, judging.threshold(name))
        change = "if users read decisions from it" if fallback else "to read it otherwise"
        lines.append(f"{found}; --judged-as {name}=KIND {change}")
    return lines
