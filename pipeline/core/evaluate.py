"""Fidelity of a variant against its FP32 source: does it make the decisions its users make?

For every output, against the FP32 source on the same rows, what the output is judged as
(`output_kind`, and `kind_from`: how that was known), read from the entry (`judged_as`, the task) and
from the source's own values, never from the operators that computed them, and the decisions that fit
it (pipeline.core.decisions):
  - class scores (the task says so, or the source's rows are a softmax or log-softmax over an axis):
    top-1 agreement, per position for scores over positions ([batch, positions, classes]);
  - independent probabilities (every value in [0, 1], rows not summing to 1: a sigmoid's): decisions at
    the output's threshold, flips and F1 against the source's;
  - an embedding (a declared `task: embedding`): whether each row's nearest neighbours among the
    scored rows stay the same (recall@10) and the rank correlation of all pairwise similarities;
  - a grid of channels (a detector's [batch, 4 + classes, anchors] or [batch, anchors, 4 + 1 + classes]:
    box coordinates beside scores in [0, 1], at any scale, or channels on scales 50x apart): its
    probability channels by their decisions (the worst channel's), its coordinate channels by their worst error
    relative to their own peak (`channel_error`);
  - raw logits read through a sigmoid (`logits`: a detector's per-anchor scores, a presence flag): the
    decisions at the logit of the threshold; raw logits read by an argmax (`class_logits`: a CTC
    recogniser's [T, classes]): the class at every position; a CTC recogniser's scores, declared (`ctc`):
    each row's greedy-decoded string;
  - points (`points`: landmarks, keypoints, in the output's own units): the largest displacement and the
    share of points within a tolerance;
  - anything else (`values`: no decision found): the worst row's cosine and the largest error against the
    output's own magnitude, so that one moved value shows.
How a reading is found, in this order: the entry's word for the output (`judged_as`), the task, the
source's values on the scoring rows (an operator in the graph shows in them: a sigmoid's values in [0, 1], a
softmax's rows summing to 1), then the output's name where the exporter kept a telling one ('landmarks',
'logits', 'classificators'). Cosine and relative error are kept for every output as context. The task
metric (labels) is pipeline.core.task_metrics.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from pipeline.core.data import Arrays, DataSet
from pipeline.core.decisions import (
    DEFAULT_THRESHOLD,
    Decisions,
    Points,
    argmax_logits,
    channel_decisions,
    class_axis,
    logit,
    probability_channels,
    sequences_kept,
    strings_kept,
    top1_agreement,
    within_unit_interval,
)
from pipeline.core.records.measured import OutputFidelity

if TYPE_CHECKING:
    from pipeline.core.config import ModelConfig
    from pipeline.core.task_metrics import TaskMetric


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


OutputKind = Literal["class_scores", "probabilities", "embedding", "channels", "logits", "class_logits", "ctc",
                     "points", "strings", "values"]  # fmt: skip
TEXT = "USO"  # numpy kinds of text outputs (str, bytes, objects): judged by equality, never by a number


def strings_fidelity(reference: np.ndarray, output: np.ndarray, why: str) -> dict[str, Any]:
    """A text output (a classifier's STRING class names): the share of rows whose strings equal the source's, and
    how many differ (decision_flips)."""
    rows = len(reference)
    same = [bool(np.array_equal(r.astype(str), o.astype(str))) for r, o in zip(reference, output, strict=True)]
    return {"output_kind": "strings", "kind_from": why, "values_per_row": int(np.prod(reference.shape[1:])),
            "top1_agreement": None, "sequences_kept": sum(same) / rows if rows else 1.0,
            "decision_flips": rows - sum(same)}  # fmt: skip


# What the exported graph's last computing operator tells of an output's range: these bound it to [0, 1] (a
# probability reading holds), these do not (values that happen to lie in [0, 1] on the eval rows stay values)
BOUNDED_PRODUCERS = {"Sigmoid", "Softmax", "Clip", "HardSigmoid", "TreeEnsembleClassifier", "ZipMap"}
UNBOUNDED_PRODUCERS = {"Gemm", "MatMul", "Conv", "ConvTranspose", "Add", "Einsum", "MatMulInteger",
                       "QLinearMatMul", "QLinearConv", "ConvInteger", "TreeEnsembleRegressor", "TreeEnsemble",
                       "LinearRegressor"}  # fmt: skip
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


@dataclass(frozen=True)
class Judging:
    """How a model's outputs are judged, from its catalog entry: `class_scores`, the metric whose
    predictions the first output holds (None: unless its values say so); `embedding`, every output is
    an embedding; `declared`, an output's kind by name (`judged_as`); `thresholds`, the value at which
    an output's probabilities are read (`decision_threshold`, default 0.5)."""

    class_scores: str | None = None
    embedding: bool = False
    declared: dict[str, str] = field(default_factory=dict)
    producers: dict[str, str] = field(default_factory=dict)  # by output: the operator computing it (the export's)
    thresholds: dict[str, float] = field(default_factory=dict)
    tolerances: dict[str, float] = field(default_factory=dict)  # points: how far a point may move (its units)
    point_dims: dict[str, int] = field(default_factory=dict)  # points: coordinates per point

    @classmethod
    def of(cls, config: ModelConfig, producers: dict[str, str] | None = None) -> Judging:
        """The entry's judging; `producers`, the export's graph (SourceRecord.export.producers) where it is known."""
        return cls(config.class_scores, config.embedding, dict(config.judged_as), dict(producers or {}),
                   dict(config.decision_threshold), dict(config.point_tolerance), dict(config.point_dims))  # fmt: skip

    def threshold(self, name: str) -> float:
        return self.thresholds.get(name, DEFAULT_THRESHOLD)

    def kind(self, position: int, name: str, reference: np.ndarray) -> tuple[OutputKind, str]:
        """What output `name`, at `position` among the outputs, is judged as (output_kind): the entry's class
        scores are the first output's."""
        if reference.dtype.kind in TEXT:
            return "strings", "text (a STRING tensor): each row's strings compared whole, by equality"
        class_scores = self.class_scores if position == 0 else None
        return output_kind(reference.astype(np.float64), class_scores, self.embedding, self.declared.get(name), name,
                           self.producers.get(name))  # fmt: skip

    def read(self, position: int, name: str, reference: np.ndarray, output: np.ndarray) -> dict[str, Any]:
        """Output `name`'s fidelity block, read as kind() finds (output_fidelity)."""
        kind, why = self.kind(position, name, reference)
        if kind == "strings":
            return strings_fidelity(reference, np.asarray(output), why)
        points = (self.point_dims.get(name), self.tolerances.get(name))
        return output_fidelity(reference, output, kind, why, self.threshold(name), points)


# Names exporters keep that tell a reading (tokens of the output's name: 'face_landmarks', 'classificators')
POINT_NAMES = {"landmark", "landmarks", "keypoint", "keypoints", "kpt", "kpts", "kps", "joints", "pose", "mesh",
               "points", "coords", "lmk", "lmks"}  # fmt: skip
LOGIT_NAMES = {"logit", "logits", "classificator", "classificators", "objectness", "presence", "conf", "confidence",
               "score", "scores"}  # fmt: skip
NO_DECISION = "none of the above: no decision found, judged by cosine and its largest error"


def name_tokens(name: str) -> set[str]:
    """The words of an output name: 'Identity_1:0' -> identity, 1, 0; 'faceLandmarks' -> face, landmarks."""
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", name)
    return {token.lower() for token in re.split(r"[^A-Za-z0-9]+", spaced) if token}


def reading_by_name(name: str | None, reference: np.ndarray) -> tuple[OutputKind, str] | None:
    """A reading the output's name tells, where its values could not: points, or raw logits (one score per
    position: read through a sigmoid; several: by an argmax over the last axis)."""
    words = name_tokens(name or "")
    if words & POINT_NAMES and not words & LOGIT_NAMES and reference.size:  # 'keypoint_scores' are scores
        return "points", f"its name {name!r} (points: each point's displacement in the output's units)"
    if words & LOGIT_NAMES:
        if reference.ndim < 2 or reference.shape[-1] == 1:
            return "logits", f"its name {name!r}, one unbounded score per position (logits read through a sigmoid)"
        return "class_logits", f"its name {name!r}, unbounded scores over its last axis (logits read by argmax)"
    return None


def output_kind(
    reference: np.ndarray, class_scores: str | None, embedding: bool, declared: str | None = None,
    name: str | None = None, producer: str | None = None,
) -> tuple[OutputKind, str]:  # fmt: skip
    """What an output is judged as, and how that was known: the entry's word for this output first
    (`judged_as`), then the task (class scores, an embedding), then the source's own values (a softmax or
    log-softmax over an axis; rows of unit norm, an embedding; values in [0, 1], a sigmoid's where the graph
    shows no other `producer`: a Linear layer's values in [0, 1] are values; a grid of channels; raw logits
    over a class axis), then the output's `name`, else values (no decision found)."""
    one_score = reference.ndim < 2 or reference.shape[-1] == 1  # nothing to pick a class among
    if declared is not None:
        if declared == "class_scores" and one_score:
            return "probabilities", "declared class scores, one per row: read at the threshold"
        return declared, "declared (judged_as)"  # type: ignore[return-value]
    if class_scores is not None:
        if one_score:
            return "probabilities", f"one score per row (metric {class_scores})"
        return "class_scores", f"the task's class scores (metric {class_scores})"
    if (axis := class_axis(reference)) is not None:
        return "class_scores", f"rows sum to 1 over axis {axis} (a softmax)"
    if embedding:
        return "embedding", "declared (task: embedding)"
    if unit_rows(reference):
        return "embedding", "every row has unit L2 norm (a normalised embedding: compared by cosine, not thresholded)"
    unbounded = producer in UNBOUNDED_PRODUCERS
    if within_unit_interval(reference) and not unbounded:
        by = f"the graph's {producer}" if producer in BOUNDED_PRODUCERS else "a sigmoid's"
        return "probabilities", f"every value in [0, 1], rows not summing to 1 ({by})"
    if (grid := grid_channels(reference)) is not None:
        return "channels", grid[2]
    if argmax_logits(reference):
        return (
            "class_logits",
            "unbounded scores of both signs over a last axis of classes, one confident at most "
            "positions (logits read by argmax)",
        )
    if (by_name := reading_by_name(name, reference)) is not None:
        return by_name
    if unbounded and within_unit_interval(reference):
        return "values", (f"every value in [0, 1], but the graph's {producer} computes it (no Sigmoid, Softmax or "
                          "Clip): values, judged by cosine and its largest error")  # fmt: skip
    return "values", NO_DECISION


def unit_rows(reference: np.ndarray) -> bool:
    """Rows of several values, each of L2 norm 1: an embedding normalised for cosine similarity (a speaker
    encoder's ReLU'd vector is all in [0, 1] too, yet nobody thresholds it)."""
    if reference.ndim != 2 or reference.shape[-1] < 2 or len(reference) == 0:
        return False
    norms = np.linalg.norm(reference.astype(np.float64), axis=-1)
    return bool(np.allclose(norms, 1.0, atol=1e-3))


def decision_figures(
    ref: np.ndarray,
    got: np.ndarray,
    kind: str,
    threshold: float,
    points: tuple[int | None, float | None] = (None, None),
) -> dict[str, Any]:
    """The decisions an output's users make, kept or not (pipeline.core.decisions), by its kind; `points`:
    a points output's coordinates per point and tolerance (None: their defaults)."""
    block: dict[str, Any] = {}
    if kind in ("class_scores", "class_logits") and ref.ndim >= 2 and ref.shape[-1] > 1:
        axis = (class_axis(ref) or -1) if kind == "class_scores" else -1
        block["top1_agreement"] = top1_agreement(ref, got, axis)
        if (whole := sequences_kept(ref, got, axis)) is not None:
            block["sequences_kept"] = whole
    elif kind == "ctc" and ref.ndim >= 3:  # positions x classes per row: the decoded string is the decision
        block["sequences_kept"] = strings_kept(ref, got)
    elif kind == "probabilities":
        block |= _decisions(Decisions.count(ref, got, threshold))
    elif kind == "logits":
        at = logit(threshold)
        block |= _decisions(Decisions.count(ref, got, at)) | {"decision_threshold": threshold, "decision_logit": at}
    elif kind == "points":
        moved = Points.measure(ref, got, *points)
        block |= {"point_dims": moved.dims, "point_tolerance": moved.tolerance, "points_within": moved.within,
                  "rows_within": moved.rows_within, "max_displacement": moved.max_displacement,
                  "worst_point": moved.worst}  # fmt: skip
    elif kind == "channels" and ref.ndim >= 3:
        grid = grid_channels(ref)
        axis, peaks = grid[:2] if grid else (1, channel_peaks(ref, 1))  # declared: channels on axis 1
        scores = probability_channels(ref, axis)
        if scores.any():
            decided, worst = channel_decisions(ref, got, axis, scores, threshold)
            block |= _decisions(decided) | {"worst_decision_channel": worst}
        if not scores.all():  # coordinates: error against their own scale
            block["channel_error"], block["worst_channel"] = channel_errors(ref, got, axis, peaks, ~scores)
    return block


def _decisions(found: Decisions) -> dict[str, Any]:
    return {
        "decision_threshold": found.threshold,
        "decision_f1": found.f1,
        "decision_flips": found.flips,
        "decision_positives": found.positives,
    }


def output_fidelity(
    reference: np.ndarray, output: np.ndarray, kind: OutputKind, why: str, threshold: float = DEFAULT_THRESHOLD,
    points: tuple[int | None, float | None] = (None, None),
) -> dict[str, Any]:  # fmt: skip
    """One output's fidelity block: what it was judged as (`kind`) and why, its decisions kept (by its
    kind), and the similarity figures beside them (cosine, relative error) as context."""
    ref, got = reference.astype(np.float64), np.asarray(output).astype(np.float64)
    cosine = cosine_per_sample(ref, got) if len(ref) else np.ones(1)
    scale = float(np.linalg.norm(ref))
    error = float(np.linalg.norm(got - ref))
    max_abs = float(np.abs(got - ref).max(initial=0.0))
    largest = float(np.abs(ref).max(initial=0.0))
    values_per_row = int(np.prod(ref.shape[1:], dtype=np.int64)) if ref.ndim else 1
    block: dict[str, Any] = {
        "output_kind": kind,
        "kind_from": why,
        "cosine_mean": float(cosine.mean()),
        "cosine_min": float(cosine.min()),
        "rel_l2": error / scale if scale > 0 else (0.0 if error == 0 else float("inf")),
        "max_abs_diff": max_abs,
        "max_rel_diff": max_abs / largest if largest > 0 else (0.0 if max_abs == 0 else float("inf")),
        "values_per_row": values_per_row,
        "top1_agreement": None,
        **decision_figures(ref, got, kind, threshold, points),
    }
    if kind == "embedding" and values_per_row > 1:
        block |= neighbour_agreement(ref, got)
    return block


def fidelity_block(
    reference: Arrays,
    outputs: Arrays,
    class_scores: str | None = None,
    embedding: bool = False,
    judging: Judging | None = None,
) -> dict[str, dict[str, Any]]:
    """Fidelity of every output (by name), judged as `judging` says (default: `class_scores`, the first
    output's, and `embedding`); any other output by its declared kind or its values."""
    judging = judging or Judging(class_scores, embedding)
    block = {}
    for i, (name, ref) in enumerate(reference.items()):
        if name not in outputs:
            raise ValueError(f"output {name!r} missing (got {', '.join(outputs)})")
        got = np.asarray(outputs[name])
        if got.shape != ref.shape:
            raise ValueError(f"output {name!r} has shape {got.shape}, the source gave {ref.shape}")
        block[name] = judging.read(i, name, ref, got)
    return block


MOVED = 1e-5  # an answer moved past float rounding: by more than this share of the output's largest magnitude


def edge_block(edges: DataSet, outputs: Arrays, judging: Judging) -> dict[str, Any]:
    """A variant on a tree ensemble's split-threshold rows (records.EdgeRows): how many rows' answers moved past
    float rounding (a leaf taken on the other side of a split), and each output's fidelity there."""
    moved = np.zeros(len(edges), dtype=bool)
    for name, ref in edges.outputs.items():
        difference = np.abs(np.asarray(outputs[name], np.float64) - ref).reshape(len(ref), -1).max(axis=1)
        moved |= difference > MOVED * max(float(np.abs(ref).max(initial=0.0)), np.finfo(np.float32).tiny)
    return {"rows": len(edges), "origin": edges.origin, "moved": int(moved.sum()),
            "fidelity": fidelity_block(edges.outputs, outputs, judging=judging)}  # fmt: skip


def search_score(reference: Arrays, outputs: Arrays, judging: Judging) -> float:
    """The worst output's fidelity score (OutputFidelity.score, 1 = every decision kept: the decision F1 of
    probabilities and logits, the top-1 agreement of class scores, a grid's worse of its decisions' F1 and
    1 - its coordinates' worst error, the share of points kept; the worst of cosine and 1 - the largest error
    of plain values) on the rows a search tunes on."""
    return min(
        OutputFidelity.model_validate(judging.read(i, name, ref, np.asarray(outputs[name]))).score or 0.0
        for i, (name, ref) in enumerate(reference.items())
    )


@dataclass(frozen=True)
class SearchGoal:
    """What a fallback's search (NNCF's accuracy control, ONNX Runtime's layer search) raises on the rows it
    tunes on, never the scoring rows: the task metric when the entry has one and the rows carry labels,
    else the worst output's decision score (search_score: 1 = every decision kept). Higher is better for
    both searches, so a lower-is-better metric (an error rate) reads as 1 - its value: the shift leaves
    every absolute drop as it is, where a negation would hand NNCF a source figure of 0 for a perfect
    source (its drop computation divides by it, whatever the drop type)."""

    rows: DataSet
    judging: Judging
    metric: TaskMetric | None = None

    def figure(self, outputs: Arrays, rows: DataSet | None = None) -> float:
        """The figure of `outputs` on `rows` (default: all the goal's rows)."""
        rows = rows or self.rows
        if self.metric is None:
            return search_score(rows.outputs, outputs, self.judging)
        value = self.metric(outputs, rows.targets)
        return value if self.metric.higher_is_better else 1.0 - value

    @property
    def source_figure(self) -> float:
        """The FP32 source's own figure on the rows (1 for decisions kept against itself)."""
        return self.figure(self.rows.outputs)

    @property
    def what(self) -> str:
        if self.metric is None:
            return "the worst output's decision score (1 = every decision kept)"
        return f"the task metric {self.metric.name}" + (
            "" if self.metric.higher_is_better else " (1 - it: lower is better)"
        )
