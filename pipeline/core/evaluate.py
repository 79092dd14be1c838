"""Fidelity of a variant against its FP32 source: does it make the decisions its users make?

For every output, against the FP32 source on the same rows: what the output is read as (`output_kind`, and
`kind_from`: how that was known; pipeline.core.readings finds it from the entry, the task, the source's values and
the export's graph), the decisions that reading carries, kept or not (its figures), and the similarity figures
beside them (cosine, relative error) as context. The task metric (labels) is pipeline.core.task_metrics.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from pipeline.core.data import Arrays, DataSet
from pipeline.core.decisions import DEFAULT_THRESHOLD, float_rounding
from pipeline.core.readings import READINGS, Ask, detect
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

    def kind(self, position: int, name: str, reference: np.ndarray) -> tuple[str, str]:
        """What output `name`, at `position` among the outputs, is read as, and how that was known
        (pipeline.core.readings.detect): the entry's class scores are the first output's."""
        class_scores = self.class_scores if position == 0 else None
        return detect(reference, class_scores, self.embedding, self.declared.get(name), name, self.producers.get(name))

    def read(self, position: int, name: str, reference: np.ndarray, output: np.ndarray) -> dict[str, Any]:
        """Output `name`'s fidelity block, read as kind() finds (output_fidelity)."""
        kind, why = self.kind(position, name, reference)
        ask = Ask(self.threshold(name), self.point_dims.get(name), self.tolerances.get(name))
        return output_fidelity(reference, output, kind, why, ask)


def output_fidelity(
    reference: np.ndarray, output: np.ndarray, kind: str, why: str, ask: Ask | None = None
) -> dict[str, Any]:
    """One output's fidelity block: what it was read as (`kind`, a READINGS name) and why, the decisions that
    reading carries, kept or not (its figures), and the similarity figures beside them (cosine, relative error)
    as context; text is compared by equality alone."""
    reading, ask = READINGS[kind], ask or Ask()
    if not reading.numeric:
        return {"output_kind": kind, "kind_from": why, **reading.figures(reference, np.asarray(output), ask)}
    ref, got = reference.astype(np.float64), np.asarray(output).astype(np.float64)
    cosine = cosine_per_sample(ref, got) if len(ref) else np.ones(1)
    scale = float(np.linalg.norm(ref))
    error = float(np.linalg.norm(got - ref))
    max_abs = float(np.abs(got - ref).max(initial=0.0))
    largest = float(np.abs(ref).max(initial=0.0))
    return {
        "output_kind": kind,
        "kind_from": why,
        "cosine_mean": float(cosine.mean()),
        "cosine_min": float(cosine.min()),
        "rel_l2": error / scale if scale > 0 else (0.0 if error == 0 else float("inf")),
        "max_abs_diff": max_abs,
        "max_rel_diff": max_abs / largest if largest > 0 else (0.0 if max_abs == 0 else float("inf")),
        "values_per_row": int(np.prod(ref.shape[1:], dtype=np.int64)) if ref.ndim else 1,
        "top1_agreement": None,
        **reading.figures(ref, got, ask),
    }


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


def edge_block(edges: DataSet, outputs: Arrays, judging: Judging) -> dict[str, Any]:
    """A variant on a tree ensemble's split-threshold rows (records.EdgeRows): how many rows' answers moved past
    float rounding (a leaf taken on the other side of a split), and each output's fidelity there."""
    moved = np.zeros(len(edges), dtype=bool)
    for name, ref in edges.outputs.items():
        difference = np.abs(np.asarray(outputs[name], np.float64) - ref).reshape(len(ref), -1).max(axis=1)
        moved |= difference > float_rounding(ref)
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
