"""Accuracy and fidelity of a variant against its FP32 source.

Two questions, answered separately: does the variant still do the task (the task metric on the
eval labels, and its delta against the source's own score), and does it compute the same function
(max abs diff of outputs, agreement of top-1 predictions). Without labels the task metric becomes
`fidelity`: the top-1 agreement with the source, so a delta still means "how much worse".
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pipeline.data import Arrays


def predictions(output: np.ndarray, metric: str) -> np.ndarray | None:
    """Predicted classes: a 0.5 threshold for one probability, argmax over the last axis otherwise."""
    if output.ndim == 0 or output.shape[0] == 0:
        return None
    flat = output.reshape(len(output), -1)
    if metric == "binary_accuracy" or flat.shape[1] == 1:
        return None if metric == "none" else (flat[:, 0] > 0.5).astype(np.int64)
    return flat.argmax(axis=1)


def task_metric(metric: str, output: np.ndarray, labels: np.ndarray | None) -> float | None:
    """The task metric of one output against labels; None when there is nothing to score."""
    if metric == "none" or labels is None:
        return None
    predicted = predictions(output, metric)
    if predicted is None:
        return None
    return float(np.mean(predicted == labels.reshape(len(labels), -1)[:, 0].astype(np.int64)))


def compare(reference: Arrays, outputs: Arrays, metric: str) -> dict[str, float | None]:
    """Numerical fidelity of `outputs` against the FP32 source's `reference` outputs."""
    max_abs, mean_abs = 0.0, []
    for name, ref in reference.items():
        if name not in outputs:
            raise ValueError(f"output {name!r} missing (got {', '.join(outputs)})")
        got = np.asarray(outputs[name])
        if got.shape != ref.shape:
            raise ValueError(f"output {name!r} has shape {got.shape}, the source gave {ref.shape}")
        diff = np.abs(got.astype(np.float64) - ref.astype(np.float64))
        max_abs = max(max_abs, float(diff.max(initial=0.0)))
        mean_abs.append(float(diff.mean()) if diff.size else 0.0)
    primary = next(iter(reference))
    ref_pred, got_pred = predictions(reference[primary], metric), predictions(outputs[primary], metric)
    agreement = None if ref_pred is None or got_pred is None else float(np.mean(ref_pred == got_pred))
    return {"max_abs_diff": max_abs, "mean_abs_diff": float(np.mean(mean_abs)), "top1_agreement": agreement}


def accuracy_block(metric: str, labels: np.ndarray | None, reference: Arrays, outputs: Arrays) -> dict[str, Any]:
    """The `accuracy` block of a metrics file (schema in README): metric, value, delta, fidelity."""
    fidelity = compare(reference, outputs, metric)
    primary = next(iter(reference))
    value = task_metric(metric, outputs[primary], labels)
    source_value = task_metric(metric, reference[primary], labels)
    if value is None or source_value is None:
        name, value, source_value = "fidelity", fidelity["top1_agreement"], 1.0
    else:
        name = metric
    delta = None if value is None else value - source_value
    return {"metric": name, "value": value, "source_value": source_value, "delta": delta, **fidelity}
