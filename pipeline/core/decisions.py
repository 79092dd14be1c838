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


SCALE_RATIO = 50.0  # channels whose reference peaks differ by more than this are judged one by one
MAX_CHANNELS = 256  # an axis longer than this holds positions or features, not channels


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
        peaks = channel_peaks(reference, axis)
        live = peaks[peaks > 0]
        if len(live) >= 2 and live.max() > SCALE_RATIO * live.min():
            return axis, peaks
    return None


def score_grid(reference: np.ndarray) -> tuple[int, np.ndarray] | None:
    """(axis, each channel's peak |value|) when an axis after the batch holds a detector's channels at any
    scale: some channels all in [0, 1] (objectness, class scores) beside others that are not (boxes), and
    more positions than channels (anchors: a hidden state [batch, 8 tokens, 128] is no grid), else None."""
    if reference.ndim < 3 or not reference.size:
        return None
    for axis in dict.fromkeys((1, reference.ndim - 1)):
        channels = reference.shape[axis]
        if not 2 <= channels <= MAX_CHANNELS or reference[0].size // channels < channels:
            continue
        bounded = probability_channels(reference, axis)
        if bounded.any() and not bounded.all():
            return axis, channel_peaks(reference, axis)
    return None


def grid_channels(reference: np.ndarray) -> tuple[int, np.ndarray, str] | None:
    """(axis, peaks, why) of a grid of channels: mixed scales, else scores beside boxes."""
    if (mixed := mixed_scale_channels(reference)) is not None:
        return (*mixed, f"axis {mixed[0]} holds channels on scales over {SCALE_RATIO:g}x apart")
    if (scored := score_grid(reference)) is not None:
        return (*scored, f"axis {scored[0]} holds score channels in [0, 1] beside unbounded ones (boxes)")
    return None


def channel_peaks(reference: np.ndarray, axis: int) -> np.ndarray:
    """Each channel's largest |value| along `axis`."""
    channels = reference.shape[axis]
    return np.abs(np.moveaxis(reference, axis, 0).reshape(channels, -1)).max(axis=1).astype(np.float64)


def channel_errors(
    reference: np.ndarray, output: np.ndarray, axis: int, peaks: np.ndarray, judged: np.ndarray | None = None
) -> tuple[float, str]:
    """The worst channel's max abs error relative to its own reference peak, and which channel it is
    (with the figures a person checks: its error and its peak), over the `judged` channels (default all).
    A channel the source holds at 0 is judged against the largest peak."""
    channels = len(peaks)
    diff = np.abs(np.moveaxis(output - reference, axis, 0).reshape(channels, -1)).max(axis=1)
    scale = np.where(peaks > 0, peaks, peaks.max())
    relative = diff / np.where(scale > 0, scale, 1.0)
    if judged is not None:
        relative = np.where(judged, relative, -np.inf)
    worst = int(np.argmax(relative))
    return float(
        relative[worst]
    ), f"axis {axis} channel {worst}: max error {diff[worst]:.4g} of a {peaks[worst]:.4g} peak"


NEIGHBOURS = 10  # recall@k of the source's nearest neighbours


def neighbour_agreement(reference: np.ndarray, output: np.ndarray, k: int = NEIGHBOURS) -> dict[str, float | None]:
    """Does the variant rank the rows as the source does? Rows flattened and compared by cosine:
    `neighbour_recall`, the mean share of each row's k nearest other rows under the source that
    stay among its k nearest under the variant (k capped at rows - 1); `similarity_rank_corr`,
    Spearman's rank correlation of every pair's similarity. None below 3 rows, or when every pair
    is alike (nothing to rank)."""
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
        "similarity_rank_corr": None if alike else rank_correlation(ref_pairs, got_pairs),
    }


def rank_correlation(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation, as scipy.stats.spearmanr computes it (Pearson's of the ranks, ties at their
    mean rank): numpy alone, for scipy.stats' import is 0.35 s of every bench of an embedder."""

    def ranks(values: np.ndarray) -> np.ndarray:
        _, at, counts = np.unique(values, return_inverse=True, return_counts=True)
        return (np.cumsum(counts) - (counts + 1) / 2)[at]  # each tie group at its mean rank (0-based)

    return float(np.corrcoef(ranks(a), ranks(b))[0, 1])


def _similarities(rows: np.ndarray) -> np.ndarray:
    """Cosine similarity of every pair of rows (flattened); a zero row is alike to none."""
    flat = rows.reshape(len(rows), -1).astype(np.float64)
    norms = np.linalg.norm(flat, axis=1, keepdims=True)
    unit = flat / np.where(norms > 0, norms, 1.0)
    return unit @ unit.T


MOVED = 1e-5  # an answer moved past float rounding: by more than this share of the output's largest magnitude


def float_rounding(reference: np.ndarray) -> float:
    """How far an answer may move and still be the same answer: MOVED of the reference's largest magnitude."""
    return MOVED * max(float(np.abs(reference).max(initial=0.0)), np.finfo(np.float32).tiny)


def pairs_ordered(reference: np.ndarray, output: np.ndarray, block: int = 512) -> tuple[float, int]:
    """A ranking's decisions: of every pair of rows whose source scores differ past float rounding (MOVED of the
    largest score), the share the variant keeps in the source's order (a tie it makes is no order), and how many
    rows moved past another. Over all rows, not within queries: an order kept everywhere is kept in every query."""
    ref = reference.reshape(len(reference), -1)[:, 0].astype(np.float64)
    got = output.reshape(len(output), -1)[:, 0].astype(np.float64)
    rounding = float_rounding(ref)
    apart = kept = 0
    moved = np.zeros(len(ref), dtype=bool)
    for start in range(0, len(ref), block):  # a block of rows against every row: memory stays block x rows
        ref_gap = ref[start : start + block, None] - ref[None, :]
        told = np.abs(ref_gap) > rounding
        swapped = told & (np.sign(ref_gap) != np.sign(got[start : start + block, None] - got[None, :]))
        apart += int(told.sum())
        kept += int((told & ~swapped).sum())
        moved[start : start + block] |= swapped.any(axis=1)
    return (kept / apart if apart else 1.0), int(moved.sum())
