"""The decisions users make from an output, and how many of them a variant changes.

A similarity figure (a row's cosine) can stay at 0.996 while 4% of the decisions read off the output
change, and can fall to 0.96 while 99.7% of them stay: users act on the decisions. By what the output is:
- independent probabilities (a sigmoid: values in [0, 1] whose rows are not a softmax): each value is
  read at a threshold (0.5 unless the entry says otherwise per output, `decision_threshold`); the
  variant's decisions against the source's are counted as a detector's or a tagger's would be, F1
  with the source as truth (`decision_f1`, constraint `min_decision_f1`);
- class scores (a softmax or log-softmax over an axis, or declared): the class picked at every
  position (top-1 per row of [batch, classes], per position of [batch, positions, classes]);
- a grid of channels (a detector's boxes beside its objectness and class scores, in either layout, at
  any scale): the channels whose values lie in [0, 1] are probabilities read at the threshold, each
  channel with enough positives on its own and the rare ones pooled, the worst of them counting;
  the others (coordinates) by error relative to their own peak. A channel that neither the source nor
  the variant takes past the threshold makes no decision, so it cannot reject a variant on its own;
- raw logits read through a sigmoid (a detector's per-anchor scores before the package's sigmoid): the
  decisions at the logit of the threshold (0 for 0.5), counted as probabilities' are;
- raw logits read by an argmax (a CTC recogniser's [positions, classes] before its greedy decode): the
  class picked at every position, as class scores'; for both, over a sequence of positions, the rows
  whose every position kept its class (a string is read whole: `sequences_kept`);
- a CTC recogniser's scores or logits, declared (`ctc`): each row's greedy decode (the best class per
  position, repeats merged, the blank dropped), the rows whose decoded string is the source's
  (`sequences_kept`): a position at a character's edge moving between the character and the blank
  changes no string its users read;
- points (landmarks, keypoints: groups of 2 or 3 coordinates in the output's own units): how far each
  point moved, the largest displacement, the share of points within a tolerance, and the share of rows
  (faces, hands) whose every point stayed within it (`rows_within`): a mesh with one point 5 px off is a
  face its user sees drawn wrong, however few of all the points moved.
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


BLANK = 0  # the CTC blank class (PaddleOCR, ddddocr, torch.nn.CTCLoss and warp-ctc all default to 0)


def ctc_greedy(scores: np.ndarray) -> list[list[int]]:
    """Each row's best class per position [batch, positions, classes], repeats merged, blanks dropped."""
    decoded = []
    for row in scores.argmax(axis=-1).reshape(len(scores), -1):
        kept = row[np.r_[True, row[1:] != row[:-1]]]
        decoded.append([int(c) for c in kept if c != BLANK])
    return decoded


def strings_kept(reference: np.ndarray, output: np.ndarray) -> float:
    """Share of rows whose CTC greedy decode is the source's: the string a recogniser's users read."""
    return float(np.mean([a == b for a, b in zip(ctc_greedy(reference), ctc_greedy(output), strict=True)]))


MAX_SEQUENCE = 256  # positions a row's classes are read together over (a recognised string); more: a map


def sequences_kept(reference: np.ndarray, output: np.ndarray, axis: int = -1) -> float | None:
    """Share of rows whose class at every position is the source's, for class scores over positions
    ([batch, positions, classes], at most MAX_SEQUENCE positions): a recogniser's string is read whole, and
    99% of positions kept left 2 of 16 CAPTCHA strings changed. None for one position per row, or a map."""
    picked, kept = reference.argmax(axis=axis), output.argmax(axis=axis)
    positions = picked.reshape(len(picked), -1).shape[1] if picked.size else 0
    if not 2 <= positions <= MAX_SEQUENCE:
        return None
    return float(np.mean((picked == kept).reshape(len(picked), -1).all(axis=1)))


def top1_agreement(reference: np.ndarray, output: np.ndarray, axis: int = -1) -> float:
    """Share of positions (rows of [batch, classes]; every position of [batch, positions, classes])
    whose class, the largest score along `axis`, is the source's."""
    return float(np.mean(reference.argmax(axis=axis) == output.argmax(axis=axis)))


def probability_channels(reference: np.ndarray, axis: int) -> np.ndarray:
    """Which channels along `axis` hold probabilities (every value in [0, 1]), as a boolean mask."""
    channels = np.moveaxis(reference, axis, 0).reshape(reference.shape[axis], -1)
    return (channels.min(axis=1) >= 0.0) & (channels.max(axis=1) <= 1.0)


MIN_CHANNEL_POSITIVES = 20  # a score channel with fewer positives is judged pooled with the other rare ones


def channel_decisions(
    reference: np.ndarray, output: np.ndarray, axis: int, mask: np.ndarray, threshold: float
) -> tuple[Decisions, str | None]:
    """The decisions of a grid's probability channels (`mask`), the worst group's: each channel with at least
    MIN_CHANNEL_POSITIVES positives on its own (an objectness channel's F1 is not diluted by a class channel's
    thousands of positives), the rarer ones pooled; and which it is (None when nothing flipped)."""
    ref = np.moveaxis(reference, axis, 0)[mask].reshape(int(mask.sum()), -1)
    got = np.moveaxis(output, axis, 0)[mask].reshape(len(ref), -1)
    channels, rows = np.flatnonzero(mask), np.arange(len(ref))
    common = (ref >= threshold).sum(axis=1) >= MIN_CHANNEL_POSITIVES
    groups = [rows[i : i + 1] for i in rows[common]] + ([rows[~common]] if not common.all() else [])
    decided = [Decisions.count(ref[group], got[group], threshold) for group in groups]
    worst = min(range(len(groups)), key=lambda i: 2.0 if decided[i].f1 is None else decided[i].f1)
    group, found = groups[worst], decided[worst]
    if not found.flips:
        return found, None
    flips = ((ref[group] >= threshold) != (got[group] >= threshold)).sum(axis=1)
    which = f"channel {int(channels[group[np.argmax(flips)]])}"  # of a pooled group: the one that flipped most
    if len(group) > 1:
        which += f" (pooled with {len(group) - 1} channels of under {MIN_CHANNEL_POSITIVES} positives)"
    return found, f"axis {axis} {which}: {found.flips} flips against {found.positives} positives"


def logit(probability: float) -> float:
    """The raw score a sigmoid maps to `probability` (0 for 0.5): where a logit output's decisions lie."""
    return float(np.log(probability / (1.0 - probability)))


POINT_TOLERANCE = 0.01  # of the source's coordinate span, unless the entry says otherwise (point_tolerance)


def point_dims(values_per_row: int) -> int:
    """Coordinates per point of a flat landmark vector: (x, y, z) where the count divides by 3, else (x, y)."""
    return 3 if values_per_row % 3 == 0 else 2


@dataclass(frozen=True)
class Points:
    """How far a variant moved an output's points, in the output's own units: each point's Euclidean
    displacement from the source's, over every row."""

    dims: int  # coordinates per point
    tolerance: float  # a point moved farther than this is a point lost
    max_displacement: float
    worst: str  # which point moved most: row and point index
    within: float  # share of points within the tolerance
    rows_within: float  # share of rows whose every point is within it

    @classmethod
    def measure(cls, reference: np.ndarray, output: np.ndarray, dims: int | None, tolerance: float | None) -> Points:
        """`dims`: coordinates per point (default point_dims); `tolerance`: in the output's units (default
        POINT_TOLERANCE of the span of the source's coordinates)."""
        rows = len(reference)
        flat_ref = reference.reshape(rows, -1).astype(np.float64)
        flat_got = output.reshape(rows, -1).astype(np.float64)
        dims = dims or point_dims(flat_ref.shape[1])
        usable = flat_ref.shape[1] - flat_ref.shape[1] % dims
        ref = flat_ref[:, :usable].reshape(rows, -1, dims)
        got = flat_got[:, :usable].reshape(rows, -1, dims)
        moved = np.linalg.norm(got - ref, axis=-1)  # [rows, points]
        if tolerance is None:
            span = float(np.ptp(ref[..., :2])) if ref.size else 0.0
            tolerance = POINT_TOLERANCE * span if span > 0 else float(np.finfo(np.float32).eps)
        row, point = np.unravel_index(int(np.argmax(moved)), moved.shape) if moved.size else (0, 0)
        return cls(
            dims=dims,
            tolerance=tolerance,
            max_displacement=float(moved.max(initial=0.0)),
            worst=f"row {int(row)} point {int(point)}",
            within=float(np.mean(moved <= tolerance)) if moved.size else 1.0,
            rows_within=float(np.mean((moved <= tolerance).all(axis=1))) if moved.size else 1.0,
        )


MIN_LOGIT_CLASSES = 20  # fewer channels per position are more often a detector's box and keypoint offsets


def argmax_logits(reference: np.ndarray) -> bool:
    """Raw class logits over the last axis of [batch, positions, classes], known from the values alone: both
    signs (coordinates and activations after a ReLU have one), at least MIN_LOGIT_CLASSES classes, a confident
    class at most positions (a softmax of the row gives the top class at least 0.9 at half of them or more) and
    at least 5 classes picked across positions (a hidden state's outlier dimension wins everywhere, a raw
    detector grid's box coordinates outweigh its scores at every anchor)."""
    if reference.ndim != 3 or not reference.size or reference.shape[1] < 2 or reference.shape[-1] < MIN_LOGIT_CLASSES:
        return False
    values = reference.astype(np.float64)
    if values.min() >= 0 or values.max() <= 0:
        return False
    shifted = values - values.max(axis=-1, keepdims=True)
    top = 1.0 / np.exp(shifted).sum(axis=-1)  # the softmax's largest value at each position
    picked = np.unique(values.argmax(axis=-1))
    return bool(np.median(top) >= 0.9 and len(picked) >= 5)
