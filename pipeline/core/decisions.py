"""The decisions users make from an output, and how many of them a variant changes.

A similarity figure (a row's cosine) can stay at 0.996 while 4% of the decisions read off the output
change, and can fall to 0.96 while 99.7% of them stay: users act on the decisions. By what the output is:
- independent probabilities (a sigmoid: values in [0, 1] whose rows are not a softmax): each value is
  read at a threshold (0.5 unless the entry says otherwise per output, `decision_threshold`); the
  variant's decisions against the source's are counted as a detector's or a tagger's would be, F1
  with the source as truth (`decision_f1`, constraint `min_decision_f1`);
- class scores (a softmax or log-softmax over an axis, or declared): the class picked at every
  position (top-1 per row of [batch, classes], per position of [batch, positions, classes]);
- a grid of channels on mixed scales (a detector's boxes beside its objectness and class scores):
  the channels whose values lie in [0, 1] are probabilities read at the threshold, pooled; the
  others (coordinates) by error relative to their own peak. A channel that neither the source nor the
  variant takes past the threshold makes no decision, so it cannot reject a variant on its own.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DEFAULT_THRESHOLD = 0.5
PROBABILITY_TOLERANCE = 1e-3  # how far a row of probabilities may sum from 1 (float32 softmax, FP16 sources)


@dataclass(frozen=True)
class Decisions:
    """The source's decisions at a threshold against the variant's, over every value judged."""

    threshold: float
    positives: int  # values the source decides positive
    flips: int  # values decided the other way by the variant
    f1: float | None  # F1 of the variant's positives against the source's; None: neither decides any

    @classmethod
    def count(cls, reference: np.ndarray, output: np.ndarray, threshold: float) -> Decisions:
        want, got = reference >= threshold, output >= threshold
        true_pos = int(np.count_nonzero(want & got))
        false_pos, false_neg = int(np.count_nonzero(got & ~want)), int(np.count_nonzero(want & ~got))
        decided = 2 * true_pos + false_pos + false_neg
        f1 = 2 * true_pos / decided if decided else None
        return cls(threshold, int(np.count_nonzero(want)), false_pos + false_neg, f1)


def within_unit_interval(values: np.ndarray) -> bool:
    """Every value in [0, 1]: what a sigmoid (or a channel of probabilities) writes."""
    return bool(values.size) and float(values.min()) >= 0.0 and float(values.max()) <= 1.0


def class_axis(reference: np.ndarray) -> int | None:
    """The axis over which the source's rows are class probabilities (a softmax: two or more non-negative
    values summing to 1 at every position of every row) or log-probabilities (a log-softmax: their
    exponentials do): the last axis, else the first after the batch; None when neither is."""
    if reference.ndim < 2 or not reference.size:
        return None
    values = reference.astype(np.float64)
    for axis in dict.fromkeys((reference.ndim - 1, 1)):
        if reference.shape[axis] < 2:
            continue
        for probabilities in (values, np.exp(values) if values.max() <= 1e-6 else None):
            if probabilities is None or probabilities.min() < -1e-6:
                continue
            if np.abs(probabilities.sum(axis=axis) - 1.0).max() <= PROBABILITY_TOLERANCE:
                return axis
    return None


def top1_agreement(reference: np.ndarray, output: np.ndarray, axis: int = -1) -> float:
    """Share of positions (rows of [batch, classes]; every position of [batch, positions, classes])
    whose class, the largest score along `axis`, is the source's."""
    return float(np.mean(reference.argmax(axis=axis) == output.argmax(axis=axis)))


def probability_channels(reference: np.ndarray, axis: int) -> np.ndarray:
    """Which channels along `axis` hold probabilities (every value in [0, 1]), as a boolean mask."""
    channels = np.moveaxis(reference, axis, 0).reshape(reference.shape[axis], -1)
    return (channels.min(axis=1) >= 0.0) & (channels.max(axis=1) <= 1.0)


def channel_decisions(
    reference: np.ndarray, output: np.ndarray, axis: int, mask: np.ndarray, threshold: float
) -> tuple[Decisions, str | None]:
    """Decisions pooled over a grid's probability channels (`mask`), and the channel with the most flips
    (the figures a person checks), None when no value flipped."""
    ref = np.moveaxis(reference, axis, 0)[mask]
    got = np.moveaxis(output, axis, 0)[mask]
    pooled = Decisions.count(ref, got, threshold)
    flips = ((ref >= threshold) != (got >= threshold)).reshape(len(ref), -1).sum(axis=1)
    if not flips.any():
        return pooled, None
    worst = int(np.argmax(flips))
    channel = int(np.flatnonzero(mask)[worst])
    kept = Decisions.count(ref[worst], got[worst], threshold)
    return pooled, (f"axis {axis} channel {channel}: {int(flips[worst])} flips against {kept.positives} positives")
