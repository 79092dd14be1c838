"""Did a variant keep the FP32 source's answers? The quality constraints (select.constraints), judged
on a variant's measured record or on a selection candidate alike: the select stage rejects a variant
that breaks one, and a fallback's build (a variant that `rescues` another in the registry) does its
expensive work only when the variant it rescues broke one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from pipeline.core.config import Constraints
from pipeline.core.records import OutputFidelity


class Judged(Protocol):
    """What the quality constraints read (pipeline.core.records.Measured, pipeline.decide.selection.Candidate)."""

    @property
    def accuracy_drop(self) -> float | None: ...  # source metric minus the variant's (labels)
    @property
    def ppl_increase_pct(self) -> float | None: ...  # text generation
    @property
    def outputs(self) -> dict[str, OutputFidelity]: ...


@dataclass(frozen=True)
class Violation:
    constraint: str
    message: str
    excess: float  # how far past the limit, relative (0.2 = 20% over); inf for a disallowed kind


def excess(value: float, limit: float) -> float:
    return (value - limit) / abs(limit) if limit else float("inf")


def _task_violations(name: str, block: OutputFidelity, constraints: Constraints) -> list[Violation]:
    """What the output is for: a class kept (top-1 agreement), an embedding's neighbours kept."""
    found = []
    for value, floor, constraint, what in (
        (block.top1_agreement, constraints.min_top1_agreement, "min_top1_agreement", "top-1 agreement"),
        (block.neighbour_recall, constraints.min_neighbour_recall, "min_neighbour_recall", "neighbour recall@10"),
    ):
        if value is not None and floor is not None and value < floor:
            found.append(
                Violation(constraint, f"output {name}: {what} {value:.4f} < {floor:g}", (floor - value) / floor)
            )
    return found


def quality_violations(subject: Judged, constraints: Constraints) -> list[Violation]:
    """The task metric's drop when the variant has one (labels); on every output, what it is for
    (top-1 agreement of class scores, neighbour recall of an embedding) where measured, and its worst
    scoring row: each channel's error relative to its own peak for a mixed-scale grid, the cosine of
    other outputs with several values per row, the error relative to the output's range for one value
    per row (a probability's cosine over the column hides a flipped row)."""
    found = []
    drop, limit = subject.accuracy_drop, constraints.max_accuracy_drop
    if drop is not None and limit is not None and drop > limit:
        found.append(Violation("max_accuracy_drop", f"accuracy drop {drop:.4g} > {limit:g}", excess(drop, limit)))
    rise, cap = subject.ppl_increase_pct, constraints.max_ppl_increase_pct
    if rise is not None and cap is not None and rise > cap:
        found.append(Violation("max_ppl_increase_pct", f"perplexity +{rise:.3g}% > +{cap:g}%", excess(rise, cap)))
    if not subject.outputs and (constraints.min_cosine is not None or constraints.max_rel_error is not None):
        return [*found, Violation("min_cosine", "fidelity unknown (no outputs compared)", float("inf"))]
    for name, block in subject.outputs.items():
        found += _task_violations(name, block, constraints)
        if block.channel_error is not None:  # a mixed-scale grid: the row's cosine follows its largest channels
            error, cap = block.channel_error, constraints.max_channel_error
            if cap is not None and error > cap:
                found.append(
                    Violation("max_channel_error", f"output {name} {block.worst_channel} ({error:.3g} > {cap:g})",
                              excess(error, cap))
                )  # fmt: skip
        elif block.one_value_per_row:
            error, cap = block.max_rel_diff, constraints.max_rel_error
            if cap is not None and (error is None or error > cap):
                shown = "unknown" if error is None else f"{error:.4g}"
                over = float("inf") if error is None else excess(error, cap)
                found.append(Violation("max_rel_error", f"output {name}: worst row's error {shown} > {cap:g}", over))
        else:
            cosine, floor = block.cosine_min, constraints.min_cosine
            if floor is not None and (cosine is None or cosine < floor):
                shown = "unknown" if cosine is None else f"{cosine:.4f}"
                over = float("inf") if cosine is None else (floor - cosine) / floor
                found.append(Violation("min_cosine", f"output {name}: worst row's cosine {shown} < {floor:g}", over))
    return found
