"""Accuracy and fidelity of a variant against its FP32 source, answered separately.

- `accuracy`: does the variant still do the task? The task metric on the eval labels and its
  delta against the source's own score; `metric: none` (and no labels) leaves it empty.
- `fidelity`: does it compute the same function? For every output, against the FP32 source on
  the same rows: cosine similarity per sample (outputs flattened per sample; mean and worst),
  relative L2 error, max abs diff (and relative to the output's range), and what the output is
  judged as (`output_kind`), read from the config and from the source's own values, never from the
  operators that computed them:
  - class scores (the task says so, or the source's rows are probabilities: non-negative, summing to
    1 over the last axis, however the graph computes its softmax): top-1 agreement, per position for
    scores over positions ([batch, positions, classes]);
  - an embedding (a declared `task: embedding`): what a retrieval user sees, whether each row's
    nearest neighbours among the scored rows stay the same (recall@10 of the source's neighbours)
    and the rank correlation of all pairwise similarities;
  - a grid of mixed-scale channels (a detector's [batch, 4 + classes, anchors]: box coordinates in
    the hundreds beside probabilities under 1): each channel's worst error relative to its own
    reference peak (`channel_error`, `worst_channel`), since one cosine over the row is dominated by
    the largest channels and stays at 0.9995 while the class scores are wrecked;
  - anything else: worst-row cosine and relative error, no task figure.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from pipeline.core.data import Arrays


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


def cosine_per_sample(reference: np.ndarray, output: np.ndarray) -> np.ndarray:
    """Cosine similarity of each sample's flattened output with the reference's.

    A sample whose reference and output are both negligible (norms under 1e-6 of the largest
    reference norm: an all-zero ReLU embedding, a sigmoid underflowing to 0 in one runtime and
    1e-40 in another) counts as identical: its direction is noise. An output with one value per
    sample has no direction to compare per sample, so its cosine is taken over the whole column."""
    r = reference.reshape(len(reference), -1).astype(np.float64)
    o = output.reshape(len(output), -1).astype(np.float64)
    if r.shape[1] == 1:
        r, o = r.T, o.T
    r_norm, o_norm = np.linalg.norm(r, axis=1), np.linalg.norm(o, axis=1)
    negligible = 1e-6 * max(float(r_norm.max(initial=0.0)), np.finfo(np.float64).tiny)
    denominator = r_norm * o_norm
    with np.errstate(invalid="ignore", divide="ignore"):
        cosine = np.where(denominator > 0, np.einsum("ij,ij->i", r, o) / np.where(denominator > 0, denominator, 1), 0.0)
    return np.where((r_norm <= negligible) & (o_norm <= negligible), 1.0, np.clip(cosine, -1.0, 1.0))


NEIGHBOURS = 10  # recall@k of the source's nearest neighbours


def neighbour_agreement(reference: np.ndarray, output: np.ndarray, k: int = NEIGHBOURS) -> dict[str, float | None]:
    """Does the variant rank the rows as the source does? Rows flattened and compared by cosine:
    `neighbour_recall`, the mean share of each row's k nearest other rows under the source that
    stay among its k nearest under the variant (k capped at rows - 1); `similarity_rank_corr`,
    Spearman's rank correlation of every pair's similarity. None below 3 rows, or when every pair
    is alike (nothing to rank)."""
    from scipy.stats import spearmanr

    n = len(reference)
    if n < 3:
        return {"neighbour_recall": None, "similarity_rank_corr": None}
    ref_sim, got_sim = _similarities(reference), _similarities(output)
    k = min(k, n - 1)
    np.fill_diagonal(ref_sim, -np.inf)
    np.fill_diagonal(got_sim, -np.inf)
    ref_nn = np.argpartition(-ref_sim, k - 1, axis=1)[:, :k]
    got_nn = np.argpartition(-got_sim, k - 1, axis=1)[:, :k]
    recall = np.mean([len(np.intersect1d(a, b)) / k for a, b in zip(ref_nn, got_nn, strict=True)])
    upper = np.triu_indices(n, 1)
    ref_pairs, got_pairs = ref_sim[upper], got_sim[upper]
    alike = np.ptp(ref_pairs) == 0 or np.ptp(got_pairs) == 0
    return {
        "neighbour_recall": float(recall),
        "similarity_rank_corr": None if alike else float(spearmanr(ref_pairs, got_pairs).statistic),
    }


def _similarities(rows: np.ndarray) -> np.ndarray:
    """Cosine similarity of every pair of rows (flattened); a zero row is alike to none."""
    flat = rows.reshape(len(rows), -1).astype(np.float64)
    norms = np.linalg.norm(flat, axis=1, keepdims=True)
    unit = flat / np.where(norms > 0, norms, 1.0)
    return unit @ unit.T


OutputKind = Literal["class_scores", "embedding", "channels", "values"]
SCALE_RATIO = 50.0  # channels whose reference peaks differ by more than this are judged one by one
MAX_CHANNELS = 256  # an axis longer than this holds positions or features, not channels
PROBABILITY_TOLERANCE = 1e-3  # how far a row of probabilities may sum from 1 (float32 softmax, FP16 sources)


def is_probabilities(reference: np.ndarray) -> bool:
    """Rows of class probabilities: two or more non-negative values over the last axis summing to 1,
    at every position of every row (a softmax, whichever operators compute it)."""
    if reference.ndim < 2 or reference.shape[-1] < 2 or not reference.size:
        return False
    values = reference.astype(np.float64)
    sums = values.sum(axis=-1)
    return bool(values.min() >= -1e-6 and np.abs(sums - 1.0).max() <= PROBABILITY_TOLERANCE)


def mixed_scale_channels(reference: np.ndarray) -> tuple[int, np.ndarray] | None:
    """(axis, each channel's peak |value|) when an axis after the batch holds channels on different
    scales (peaks more than SCALE_RATIO apart), else None. Only outputs of rank 3 and more: a grid
    [batch, channels, positions] or [batch, positions, channels]; a 2-D row is one vector (logits,
    an embedding) whose dimensions are judged together."""
    if reference.ndim < 3 or not reference.size:
        return None
    for axis in dict.fromkeys((1, reference.ndim - 1)):
        channels = reference.shape[axis]
        if not 2 <= channels <= MAX_CHANNELS:
            continue
        peaks = np.abs(np.moveaxis(reference, axis, 0).reshape(channels, -1)).max(axis=1).astype(np.float64)
        live = peaks[peaks > 0]
        if len(live) >= 2 and live.max() > SCALE_RATIO * live.min():
            return axis, peaks
    return None


def channel_errors(reference: np.ndarray, output: np.ndarray, axis: int, peaks: np.ndarray) -> tuple[float, str]:
    """The worst channel's max abs error relative to its own reference peak, and which channel it is
    (with the figures a person checks: its error and its peak). A channel the source holds at 0 is
    judged against the largest peak."""
    channels = len(peaks)
    diff = np.abs(np.moveaxis(output - reference, axis, 0).reshape(channels, -1)).max(axis=1)
    scale = np.where(peaks > 0, peaks, peaks.max())
    relative = diff / np.where(scale > 0, scale, 1.0)
    worst = int(np.argmax(relative))
    return float(
        relative[worst]
    ), f"axis {axis} channel {worst}: max error {diff[worst]:.4g} of a {peaks[worst]:.4g} peak"


def search_score(reference: np.ndarray, output: np.ndarray) -> float:
    """The figure a quantization search raises on one output: its worst row's cosine, or for a
    mixed-scale grid 1 - its worst channel's relative error (the cosine follows its largest channels)."""
    ref, got = reference.astype(np.float64), np.asarray(output).astype(np.float64)
    if (mixed := mixed_scale_channels(ref)) is not None:
        return 1.0 - channel_errors(ref, got, *mixed)[0]
    return float(cosine_per_sample(ref, got).min())


def output_kind(
    reference: np.ndarray, class_scores: str | None, embedding: bool
) -> tuple[OutputKind, tuple[int, np.ndarray] | None]:
    """What an output is judged as: the config's word first (class scores, an embedding), then the
    source's own values (probabilities, mixed-scale channels); with a grid's channel axis and peaks."""
    if class_scores is not None or is_probabilities(reference):
        return "class_scores", None
    if embedding:
        return "embedding", None
    mixed = mixed_scale_channels(reference)
    return ("channels" if mixed is not None else "values"), mixed


def top1_agreement(reference: np.ndarray, output: np.ndarray, metric: str) -> float | None:
    """Share of rows (of positions, for scores over positions: [batch, positions, classes]) whose
    predicted class is the source's."""
    if reference.ndim >= 3:
        return float(np.mean(reference.argmax(axis=-1) == output.argmax(axis=-1)))
    ref_pred, got_pred = predictions(reference, metric), predictions(output, metric)
    return None if ref_pred is None or got_pred is None else float(np.mean(ref_pred == got_pred))


def output_fidelity(
    reference: np.ndarray, output: np.ndarray, class_scores: str | None, embedding: bool = False
) -> dict[str, Any]:
    """One output's fidelity block; `class_scores` is the metric whose predictions top-1 compares
    (None: only when the source's values are probabilities), `embedding` whether the config declares
    the outputs embeddings (neighbour recall)."""
    ref, got = reference.astype(np.float64), np.asarray(output).astype(np.float64)
    kind, mixed = output_kind(ref, class_scores, embedding)
    cosine = cosine_per_sample(ref, got) if len(ref) else np.ones(1)
    scale = float(np.linalg.norm(ref))
    error = float(np.linalg.norm(got - ref))
    max_abs = float(np.abs(got - ref).max(initial=0.0))
    largest = float(np.abs(ref).max(initial=0.0))
    values_per_row = int(np.prod(ref.shape[1:], dtype=np.int64)) if ref.ndim else 1
    block: dict[str, Any] = {
        "output_kind": kind,
        "cosine_mean": float(cosine.mean()),
        "cosine_min": float(cosine.min()),
        "rel_l2": error / scale if scale > 0 else (0.0 if error == 0 else float("inf")),
        "max_abs_diff": max_abs,
        "max_rel_diff": max_abs / largest if largest > 0 else (0.0 if max_abs == 0 else float("inf")),
        "values_per_row": values_per_row,
        "top1_agreement": top1_agreement(ref, got, class_scores or "accuracy") if kind == "class_scores" else None,
    }
    if mixed is not None:
        block["channel_error"], block["worst_channel"] = channel_errors(ref, got, *mixed)
    if kind == "embedding" and values_per_row > 1:
        block |= neighbour_agreement(ref, got)
    return block


def fidelity_block(
    reference: Arrays, outputs: Arrays, class_scores: str | None, embedding: bool = False
) -> dict[str, dict[str, Any]]:
    """Fidelity of every output (by name); the config's class scores are the first output's, any
    other output is class scores when its values are probabilities."""
    block = {}
    for i, (name, ref) in enumerate(reference.items()):
        if name not in outputs:
            raise ValueError(f"output {name!r} missing (got {', '.join(outputs)})")
        got = np.asarray(outputs[name])
        if got.shape != ref.shape:
            raise ValueError(f"output {name!r} has shape {got.shape}, the source gave {ref.shape}")
        block[name] = output_fidelity(ref, got, class_scores if i == 0 else None, embedding)
    return block


def accuracy_block(metric: str, labels: np.ndarray | None, reference: Arrays, outputs: Arrays) -> dict[str, Any]:
    """The `accuracy` block of a metrics file: the task metric of the first output, its value for
    the source and the delta; all None when there are no labels or no task metric."""
    primary = next(iter(reference))
    value = task_metric(metric, outputs[primary], labels)
    source_value = task_metric(metric, reference[primary], labels)
    scored = value is not None and source_value is not None
    return {
        "metric": metric if scored else "none",
        "value": value if scored else None,
        "source_value": source_value if scored else None,
        "delta": value - source_value if scored else None,
    }
