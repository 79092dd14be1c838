"""The task metric: the one number a model's users judge it by, computed from its outputs and labels.

`metric:` in a catalog entry is a built-in name or a function of the user's, `module:function` in the
model's folder (`models.<model>.metric:note_f1`, copied there by `add --metric FILE.py:FUNCTION` as a
factory is), the way Olive takes an evaluation function from a user script and NNCF's accuracy
control a `validation_fn`. Either is called with the model's outputs (by output name, rows first) and
the labels (every array of the eval .npz that is not an input, by name; `labels` is the usual one)
and returns one number. A function says which way is better with an attribute, `higher_is_better =
False` (an error rate), as scikit-learn's `make_scorer(greater_is_better=...)` does; the default is
higher (the drop against the source follows it: pipeline.core.records.Accuracy.drop).

Built-ins, each on the first output against `labels`:
- `accuracy`: the class with the largest score (a 0.5 threshold for one probability per row);
- `binary_accuracy`: one probability per row at 0.5;
- `f1`: multi-label decisions at 0.5 against 0/1 labels of the output's shape, micro F1
  (scikit-learn's `f1_score`, the reference implementation);
- `cer`: character error rate of a CTC recogniser: logits [batch, positions, classes] greedily
  decoded (the best class per position, repeats merged, blank 0 dropped) against label sequences of
  class ids padded with negatives (jiwer, the maintained ASR/OCR error-rate library, on rapidfuzz's
  edit distance; scikit-learn has none and torchmetrics would load torch for every call).

A metric that raises, returns no finite number or takes longer than `METRIC_TIMEOUT_S` is one
`MetricError` naming it: the variant it judged is failed, never ok.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.core.data import LABELS, Arrays
from pipeline.core.decisions import ctc_greedy
from pipeline.core.errors import PipelineError

METRIC_TIMEOUT_S = 120.0  # one call over the scoring rows; a metric slower than this is a broken one


class MetricError(PipelineError):
    """A task metric that raised, returned no number or ran too long."""


@dataclass(frozen=True)
class TaskMetric:
    """A metric by name, with its direction; calling it checks what it returns."""

    name: str
    function: Callable[[Arrays, Arrays], Any]
    higher_is_better: bool = True
    reads_every_output: bool = False  # a user's function takes them all; a built-in reads the first

    def __call__(self, outputs: Arrays, labels: Arrays) -> float:
        found: Future[Any] = Future()

        def call() -> None:
            try:
                found.set_result(self.function(outputs, labels))
            except BaseException as error:  # reported below, in one line naming the metric (sys.exit too)
                found.set_exception(error)

        threading.Thread(target=call, daemon=True, name=f"metric {self.name}").start()  # left behind if it hangs
        try:
            error = found.exception(timeout=METRIC_TIMEOUT_S)
        except TimeoutError:
            raise MetricError(f"metric {self.name}: no result after {METRIC_TIMEOUT_S:g} s") from None
        if error is not None:
            line = str(error).strip().splitlines()[0] if str(error).strip() else ""
            raise MetricError(f"metric {self.name} raised {type(error).__name__}: {line}")
        value = found.result()
        try:
            number = float(value)  # a numpy scalar or 0-d array too
        except (TypeError, ValueError):
            raise MetricError(f"metric {self.name} returned {type(value).__name__}, not a number") from None
        if not np.isfinite(number):
            raise MetricError(f"metric {self.name} returned {number}")
        return number


def _first(outputs: Arrays) -> np.ndarray:
    return np.asarray(next(iter(outputs.values())))


def _labels(labels: Arrays) -> np.ndarray:
    if LABELS not in labels:
        raise ValueError(f"needs a '{LABELS}' array in the eval data (found {sorted(labels) or 'none'})")
    return np.asarray(labels[LABELS])


def _classes(labels: Arrays) -> np.ndarray:
    """One class id per row: the first value of each row of `labels`."""
    truth = _labels(labels)
    return truth.reshape(len(truth), -1)[:, 0].astype(np.int64)


def predictions(output: np.ndarray, binary: bool = False) -> np.ndarray:
    """Predicted classes: a 0.5 threshold for one probability per row, else the largest score."""
    flat = output.reshape(len(output), -1)
    if binary or flat.shape[1] == 1:
        return (flat[:, 0] > 0.5).astype(np.int64)
    return flat.argmax(axis=1)


def accuracy(outputs: Arrays, labels: Arrays) -> float:
    return float(np.mean(predictions(_first(outputs)) == _classes(labels)))


def binary_accuracy(outputs: Arrays, labels: Arrays) -> float:
    return float(np.mean(predictions(_first(outputs), binary=True) == _classes(labels)))


def f1(outputs: Arrays, labels: Arrays) -> float:
    from sklearn.metrics import f1_score

    output, truth = _first(outputs), _labels(labels)
    if truth.shape != output.shape:
        raise ValueError(f"labels {truth.shape} do not match the first output {output.shape}")
    rows = len(output)
    return float(
        f1_score(truth.reshape(rows, -1) > 0.5, output.reshape(rows, -1) >= 0.5, average="micro", zero_division=1.0)
    )


def cer(outputs: Arrays, labels: Arrays) -> float:
    import jiwer

    logits, truth = _first(outputs), _labels(labels)
    if logits.ndim != 3:
        raise ValueError(f"expects CTC logits [batch, positions, classes], the first output is {logits.shape}")
    # jiwer compares strings: every class id becomes one character (private use area and beyond)
    as_text = lambda ids: "".join(chr(0xF0000 + int(i)) for i in ids)  # noqa: E731
    references = [as_text(row[row >= 0]) for row in truth.reshape(len(truth), -1)]
    hypotheses = [as_text(ids) for ids in ctc_greedy(logits)]
    kept = [i for i, text in enumerate(references) if text]  # an empty label has no characters to err on
    if not kept:
        raise ValueError("every label sequence is empty")
    return float(jiwer.cer([references[i] for i in kept], [hypotheses[i] for i in kept]))


BUILT_IN: dict[str, TaskMetric] = {
    "accuracy": TaskMetric("accuracy", accuracy),
    "binary_accuracy": TaskMetric("binary_accuracy", binary_accuracy),
    "f1": TaskMetric("f1", f1),
    "cer": TaskMetric("cer", cer, higher_is_better=False),
}


def resolve(metric: str, model: str, root: Path = Path(".")) -> TaskMetric | None:
    """The metric a catalog entry names: None for `none`, a built-in, or the user's function
    `module:function` (models.<model>.<file>:<function>, found as a factory is; errors name the field)."""
    if metric == "none":
        return None
    if metric in BUILT_IN:
        return BUILT_IN[metric]
    from pipeline.core.model_code import import_object

    found = import_object(metric, root, f"catalog.{model}.metric")
    if not callable(found):
        raise MetricError(f"metric {metric}: not a function")
    return TaskMetric(metric, found, bool(getattr(found, "higher_is_better", True)), reads_every_output=True)


def accuracy_block(metric: TaskMetric | None, labels: Arrays, reference: Arrays, outputs: Arrays) -> dict[str, Any]:
    """The `accuracy` block of a metrics file: the task metric of the variant and of the source on the
    same rows, and the delta (variant minus source, in the metric's units); all None without a metric or
    labels."""
    if metric is None or not labels:
        return {"metric": "none", "value": None, "source_value": None, "delta": None}
    value, source_value = metric(outputs, labels), metric(reference, labels)
    return {
        "metric": metric.name,
        "higher_is_better": metric.higher_is_better,
        "reads_every_output": metric.reads_every_output,
        "value": value,
        "source_value": source_value,
        "delta": value - source_value,
    }
