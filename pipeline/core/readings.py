"""What an output is read as, and what that reading judges: one type per reading.

Users act on the decisions an output carries, and which decisions those are depends on what the output is. A
`Reading` knows, for its kind of output, the figures that measure those decisions on the FP32 source's rows
against a variant's (`figures`, from pipeline.core.decisions), the constraints that judge them (`violations`,
select.constraints), whether it decides at all (`decides`: an embedding and plain values are judged by
similarity), and the sentence the report states its verdict in (`verdict`). `READINGS` holds one of each by the
word an entry declares (`judged_as`) and a record keeps (`output_kind`); a new reading is one class here and its
row there.

The readings:
  - class scores (the task says so, or the source's rows are a softmax or log-softmax over an axis):
    top-1 agreement, per position for scores over positions ([batch, positions, classes]);
  - independent probabilities (every value in [0, 1], rows not summing to 1: a sigmoid's): decisions at
    the output's threshold, flips and F1 against the source's;
  - an embedding (a declared `task: embedding`, or rows of unit norm): whether each row's nearest neighbours among
    the scored rows stay the same (recall@10) and the rank correlation of all pairwise similarities;
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
  - a ranking (`ranking`: a learning-to-rank model's score per row, declared or read off a ranking objective): the
    order of every pair of rows the source tells apart, kept or not;
  - text (`strings`: a STRING tensor): each row's strings equal to the source's, no tolerance;
  - anything else (`values`: no decision found): the worst row's cosine and the largest error against the
    output's own magnitude, so that one moved value shows.
How a reading is found (`detect`), in this order: the entry's word for the output (`judged_as`), the task, the
source's values on the scoring rows (an operator in the graph shows in them: a sigmoid's values in [0, 1], a
softmax's rows summing to 1; where the export knows the operator computing the output, a Linear layer's values in
[0, 1] are values), then the output's name where the exporter kept a telling one ('landmarks', 'logits',
'classificators').
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from pipeline.core.decisions import (
    DEFAULT_THRESHOLD,
    Decisions,
    Points,
    argmax_logits,
    channel_decisions,
    channel_errors,
    channel_peaks,
    class_axis,
    grid_channels,
    logit,
    neighbour_agreement,
    pairs_ordered,
    probability_channels,
    sequences_kept,
    strings_kept,
    top1_agreement,
    within_unit_interval,
)

if TYPE_CHECKING:
    from pipeline.core.config import Constraints
    from pipeline.core.records import OutputFidelity


@dataclass(frozen=True)
class Violation:
    constraint: str
    message: str
    excess: float  # how far past the limit, relative (0.2 = 20% over); inf for a disallowed kind


def excess(value: float, limit: float) -> float:
    return (value - limit) / abs(limit) if limit else float("inf")


def floor(value: float | None, least: float | None, constraint: str, what: str, detail: str = "") -> list[Violation]:
    """A figure that must stay at or above its floor (1 = every decision kept)."""
    if value is None or least is None or value >= least:
        return []
    return [Violation(constraint, f"{what} {value:.4f} < {least:g}{detail}", (least - value) / least)]


@dataclass(frozen=True)
class Ask:
    """What a reading needs beside the values (the entry's, per output): the value its decisions are read at
    (`threshold`), a points output's coordinates per point and how far a point may move (None: their defaults)."""

    threshold: float = DEFAULT_THRESHOLD
    point_dims: int | None = None
    tolerance: float | None = None


class Reading:
    """A kind of output: the figures of the decisions read off it, the constraints judging them, its verdict.

    The base judges every figure a record holds by its constraint, and by similarity where the reading decides
    nothing (Unread: a record written before readings were kept)."""

    name: ClassVar[str | None] = None
    verdict: ClassVar[str] = "judged by the figures its record holds"  # {threshold}, {logit}, {tolerance}
    decides: ClassVar[bool] = True  # judged by its decisions; its cosine and relative error are context
    numeric: ClassVar[bool] = True  # compared as numbers (cosine, errors beside the decisions); text is not
    whole: ClassVar[str] = "rows whose class at every position is kept (a sequence read whole)"  # sequences_kept
    fallback: ClassVar[bool] = False  # what an output no reading fits is read as (`add` says how to declare one)

    def figures(self, ref: np.ndarray, got: np.ndarray, ask: Ask) -> dict[str, Any]:
        """The decisions kept or not (pipeline.core.decisions), as OutputFidelity's fields."""
        return {}

    def violations(self, name: str, block: OutputFidelity, constraints: Constraints) -> list[Violation]:
        """Each constraint whose figure the block holds, then similarity where the reading decides nothing."""
        found = floor(block.top1_agreement, constraints.min_top1_agreement, "min_top1_agreement",
                      f"output {name}: top-1 agreement")  # fmt: skip
        found += floor(block.sequences_kept, constraints.min_top1_agreement, "min_top1_agreement",
                       f"output {name}: {self.whole}")  # fmt: skip
        if block.decision_f1 is not None:
            where = f"; {block.worst_decision_channel}" if block.worst_decision_channel else ""
            at = f"{block.decision_threshold:g}" + (
                "" if block.decision_logit is None else f" (logit {block.decision_logit:g})"
            )
            found += floor(block.decision_f1, constraints.min_decision_f1, "min_decision_f1",
                           f"output {name}: F1 of the decisions at {at}",
                           f" ({block.decision_flips} flips against the source's {block.decision_positives} positives"
                           f"{where})")  # fmt: skip
        if block.channel_error is not None:  # a mixed-scale grid: the row's cosine follows its largest channels
            error, cap = block.channel_error, constraints.max_channel_error
            if cap is not None and error > cap:
                found.append(Violation("max_channel_error", f"output {name} {block.worst_channel} ({error:.3g} > "
                                       f"{cap:g})", excess(error, cap)))  # fmt: skip
        if block.rows_within is not None:
            found += floor(block.rows_within, constraints.min_rows_within, "min_rows_within",
                           f"output {name}: share of rows whose every point stays within {block.point_tolerance:.3g} "
                           f"of the source's", f" (largest displacement {block.max_displacement:.3g} at "
                           f"{block.worst_point}; {block.points_within:.4f} of all points within)")  # fmt: skip
        found += floor(block.pairs_ordered, constraints.min_pairs_ordered, "min_pairs_ordered",
                       f"output {name}: share of row pairs kept in the source's order",
                       f" ({block.decision_flips} rows moved past another)")  # fmt: skip
        if self.decides:
            return found
        return found + self.similarity(name, block, constraints)

    def similarity(self, name: str, block: OutputFidelity, constraints: Constraints) -> list[Violation]:
        """An output judged by how alike it stays: its neighbours, its worst row's cosine, or for one value per row
        its worst error against the output's range (a cosine over the column hides a row that flipped)."""
        found = floor(block.neighbour_recall, constraints.min_neighbour_recall, "min_neighbour_recall",
                      f"output {name}: neighbour recall@10")  # fmt: skip
        found += self.largest_error(name, block, constraints)
        if block.one_value_per_row:
            error, cap = block.max_rel_diff, constraints.max_rel_error
            if cap is not None and (error is None or error > cap):
                shown = "unknown" if error is None else f"{error:.4g}"
                over = float("inf") if error is None else excess(error, cap)
                found.append(Violation("max_rel_error", f"output {name}: worst row's error {shown} > {cap:g}", over))
            return found
        cosine, least = block.cosine_min, constraints.min_cosine
        if least is not None and (cosine is None or cosine < least):
            shown = "unknown" if cosine is None else f"{cosine:.4f}"
            over = float("inf") if cosine is None else (least - cosine) / least
            found.append(Violation("min_cosine", f"output {name}: worst row's cosine {shown} < {least:g}", over))
        return found

    def largest_error(self, name: str, block: OutputFidelity, constraints: Constraints) -> list[Violation]:
        """Values no reading fits: one moved value shows in the largest error, where the row's cosine hides it."""
        return []

    def note(self, name: str, reference: np.ndarray, threshold: float) -> str:
        """What `add` adds to the reading it found: how to move its decisions, where there is a knob."""
        return ""


class ClassScores(Reading):
    name = "class_scores"
    verdict = "class scores: the class picked at every position kept (top-1 agreement, min_top1_agreement)"

    def axis(self, ref: np.ndarray) -> int:
        return class_axis(ref) or -1

    def figures(self, ref: np.ndarray, got: np.ndarray, ask: Ask) -> dict[str, Any]:
        if ref.ndim < 2 or ref.shape[-1] < 2:  # nothing to pick a class among
            return {}
        axis = self.axis(ref)
        block: dict[str, Any] = {"top1_agreement": top1_agreement(ref, got, axis)}
        if (whole := sequences_kept(ref, got, axis)) is not None:
            block["sequences_kept"] = whole
        return block

    def note(self, name: str, reference: np.ndarray, threshold: float) -> str:
        if reference.ndim < 3:
            return ""
        return f"; each row read whole, position by position (a CTC recogniser's: --judged-as {name}=ctc)"


class ClassLogits(ClassScores):
    name = "class_logits"
    verdict = "raw logits read by argmax: the class picked at every position kept (top-1 agreement, "
    verdict += "min_top1_agreement)"

    def axis(self, ref: np.ndarray) -> int:
        return -1


class Ctc(Reading):
    name = "ctc"
    verdict = "a CTC recogniser's scores: each row's greedy-decoded string kept (repeats merged, blank 0 dropped; "
    verdict += "min_top1_agreement)"
    whole = "rows whose decoded string is kept (CTC greedy: repeats merged, blank 0 dropped)"

    def figures(self, ref: np.ndarray, got: np.ndarray, ask: Ask) -> dict[str, Any]:
        return {"sequences_kept": strings_kept(ref, got)} if ref.ndim >= 3 else {}  # positions x classes per row


def at_threshold(found: Decisions) -> dict[str, Any]:
    return {"decision_threshold": found.threshold, "decision_f1": found.f1, "decision_flips": found.flips,
            "decision_positives": found.positives}  # fmt: skip


class Probabilities(Reading):
    name = "probabilities"
    verdict = "probabilities: the decisions at {threshold} kept (F1 against the source's, min_decision_f1)"

    def figures(self, ref: np.ndarray, got: np.ndarray, ask: Ask) -> dict[str, Any]:
        return at_threshold(Decisions.count(ref, got, ask.threshold))

    def note(self, name: str, reference: np.ndarray, threshold: float) -> str:
        return f"; decisions at {threshold:g} (--threshold {name}=V to read them elsewhere)"


class Logits(Probabilities):
    name = "logits"
    verdict = "raw logits read through a sigmoid: the decisions at {threshold} (logit {logit}) kept (F1 against the "
    verdict += "source's, min_decision_f1)"

    def figures(self, ref: np.ndarray, got: np.ndarray, ask: Ask) -> dict[str, Any]:
        at = logit(ask.threshold)
        return at_threshold(Decisions.count(ref, got, at)) | {"decision_threshold": ask.threshold, "decision_logit": at}


class Channels(Probabilities):
    name = "channels"
    verdict = "a grid of channels (a detector's): its score channels' decisions at {threshold} (min_decision_f1), "
    verdict += "its coordinates' worst error against their own peak (max_channel_error)"

    def figures(self, ref: np.ndarray, got: np.ndarray, ask: Ask) -> dict[str, Any]:
        if ref.ndim < 3:
            return {}
        grid = grid_channels(ref)
        axis, peaks = grid[:2] if grid else (1, channel_peaks(ref, 1))  # declared: channels on axis 1
        scores = probability_channels(ref, axis)
        block: dict[str, Any] = {}
        if scores.any():
            decided, worst = channel_decisions(ref, got, axis, scores, ask.threshold)
            block |= at_threshold(decided) | {"worst_decision_channel": worst}
        if not scores.all():  # coordinates: error against their own scale
            block["channel_error"], block["worst_channel"] = channel_errors(ref, got, axis, peaks, ~scores)
        return block


class PointsReading(Reading):
    name = "points"
    verdict = "points: each point's displacement in the output's units, the rows whose every point stays within "
    verdict += "{tolerance} kept (min_rows_within)"

    def figures(self, ref: np.ndarray, got: np.ndarray, ask: Ask) -> dict[str, Any]:
        moved = Points.measure(ref, got, ask.point_dims, ask.tolerance)
        return {"point_dims": moved.dims, "point_tolerance": moved.tolerance, "points_within": moved.within,
                "rows_within": moved.rows_within, "max_displacement": moved.max_displacement,
                "worst_point": moved.worst}  # fmt: skip


class Ranking(Reading):
    name = "ranking"
    verdict = "a ranking: every pair of rows the source tells apart kept in its order (min_pairs_ordered)"

    def figures(self, ref: np.ndarray, got: np.ndarray, ask: Ask) -> dict[str, Any]:
        kept, moved = pairs_ordered(ref, got)
        return {"pairs_ordered": kept, "decision_flips": moved}


class Embedding(Reading):
    name = "embedding"
    verdict = "an embedding (task: embedding): neighbour recall@10 beside the worst row's cosine (min_cosine)"
    decides = False

    def figures(self, ref: np.ndarray, got: np.ndarray, ask: Ask) -> dict[str, Any]:
        return neighbour_agreement(ref, got) if ref.ndim >= 2 and np.prod(ref.shape[1:]) > 1 else {}


class Values(Reading):
    name = "values"
    fallback = True

    def figures(self, ref: np.ndarray, got: np.ndarray, ask: Ask) -> dict[str, Any]:
        return {"error_scored": True}  # its score weighs the largest error beside the cosine (OutputFidelity.score)

    verdict = "no decision found: judged by the worst row's cosine and its largest error (min_cosine, "
    verdict += "max_value_error; one value per row: max_rel_error)"
    decides = False

    def largest_error(self, name: str, block: OutputFidelity, constraints: Constraints) -> list[Violation]:
        error, cap = block.max_rel_diff, constraints.max_value_error
        if block.one_value_per_row or cap is None or error is None or error <= cap:
            return []
        return [
            Violation(
                "max_value_error",
                f"output {name}: largest error {error:.4g} of its largest magnitude > "
                f"{cap:g} (no decision found: judged by cosine and its largest error)",
                excess(error, cap),
            )
        ]


class Strings(Reading):
    name = "strings"
    verdict = "text (a STRING tensor): each row's strings equal to the source's, no tolerance (strings_equal)"
    numeric = False
    whole = "rows whose strings equal the source's"

    def figures(self, ref: np.ndarray, got: np.ndarray, ask: Ask) -> dict[str, Any]:
        rows = len(ref)
        ref, got = ref.astype(str), got.astype(str)  # ONNX Runtime gives Python str objects, TF and NumPy '<U'
        same = sum(bool(np.array_equal(r, o)) for r, o in zip(ref, got, strict=True))
        return {"values_per_row": int(np.prod(ref.shape[1:])), "top1_agreement": None,
                "sequences_kept": same / rows if rows else 1.0, "decision_flips": rows - same}  # fmt: skip

    def violations(self, name: str, block: OutputFidelity, constraints: Constraints) -> list[Violation]:
        found = super().violations(name, block, constraints)
        if block.decision_flips:  # text is equal or not: no tolerance
            found.append(Violation("strings_equal", f"output {name}: {block.decision_flips} rows' strings differ from "
                                   "the source's", 1.0 - (block.sequences_kept or 0.0)))  # fmt: skip
        return found


ALL = (ClassScores(), Probabilities(), Embedding(), Channels(), Logits(), ClassLogits(), Ctc(), PointsReading(),
       Ranking(), Strings(), Values())  # fmt: skip
READINGS: dict[str, Reading] = {r.name: r for r in ALL if r.name}


class Unread(Reading):
    """A record written before readings were kept (no `output_kind`): every figure it holds judged, similarity too."""

    decides = False


UNKNOWN = Unread()


def reading(name: str | None) -> Reading:
    """The reading a record names (`output_kind`); UNKNOWN for a record written before readings were kept."""
    return READINGS.get(name or "", UNKNOWN)


# --- how a reading is found -------------------------------------------------------------------------------------

TEXT = "USO"  # numpy kinds of text outputs (str, bytes, objects): judged by equality, never by a number
# What the exported graph's last computing operator tells of an output's range: these bound it to [0, 1] (a
# probability reading holds), these do not (values that happen to lie in [0, 1] on the eval rows stay values)
BOUNDED_PRODUCERS = {"Sigmoid", "Softmax", "Clip", "HardSigmoid", "TreeEnsembleClassifier", "ZipMap"}
UNBOUNDED_PRODUCERS = {"Gemm", "MatMul", "Conv", "ConvTranspose", "Add", "Einsum", "MatMulInteger",
                       "QLinearMatMul", "QLinearConv", "ConvInteger", "TreeEnsembleRegressor", "TreeEnsemble",
                       "LinearRegressor"}  # fmt: skip
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


def reading_by_name(name: str | None, reference: np.ndarray) -> tuple[str, str] | None:
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


def detect(
    reference: np.ndarray, class_scores: str | None = None, embedding: bool = False, declared: str | None = None,
    name: str | None = None, producer: str | None = None,
) -> tuple[str, str]:  # fmt: skip
    """What an output is read as (a READINGS name), and how that was known: text by its dtype; the entry's word
    for this output (`declared`, judged_as), then the task (class scores, an embedding), then the source's own
    values (a softmax or log-softmax over an axis; rows of unit norm, an embedding; values in [0, 1], a sigmoid's
    where the graph shows no other `producer`: a Linear layer's values in [0, 1] are values; a grid of channels;
    raw logits over a class axis), then the output's `name`, else values (no decision found)."""
    if reference.dtype.kind in TEXT:
        return "strings", "text (a STRING tensor): each row's strings compared whole, by equality"
    reference = reference.astype(np.float64)
    one_score = reference.ndim < 2 or reference.shape[-1] == 1  # nothing to pick a class among
    if declared is not None:
        if declared == "class_scores" and one_score:
            return "probabilities", "declared class scores, one per row: read at the threshold"
        return declared, "declared (judged_as)"
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
