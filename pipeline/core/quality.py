"""Did a variant keep the FP32 source's answers? The quality constraints (select.constraints), judged
on a variant's measured record or on a selection candidate alike: the select stage rejects a variant
that breaks one, and a fallback's build (a variant that `rescues` another in the registry) does its
expensive work only when the variant it rescues broke one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from pipeline.core.config import Constraints
from pipeline.core.records import EdgeRows, OutputFidelity


class Judged(Protocol):
    """What the quality constraints read (pipeline.core.records.Measured, pipeline.decide.selection.Candidate)."""

    @property
    def accuracy_drop(self) -> float | None: ...  # the task metric's drop vs the source, its units (labels)
    @property
    def accuracy_relative_drop(self) -> float | None: ...  # the same, a fraction of the source's value
    @property
    def metric_reads_every_output(self) -> bool: ...  # a user's function (all outputs) or a built-in (the first)
    @property
    def ppl_increase_pct(self) -> float | None: ...  # text generation
    @property
    def outputs(self) -> dict[str, OutputFidelity]: ...
    @property
    def edge_rows(self) -> EdgeRows | None: ...  # a tree ensemble's split-threshold rows


@dataclass(frozen=True)
class Violation:
    constraint: str
    message: str
    excess: float  # how far past the limit, relative (0.2 = 20% over); inf for a disallowed kind


def excess(value: float, limit: float) -> float:
    return (value - limit) / abs(limit) if limit else float("inf")


def _floor(value: float | None, floor: float | None, constraint: str, what: str, detail: str = "") -> list[Violation]:
    """A figure that must stay at or above its floor (1 = every decision kept)."""
    if value is None or floor is None or value >= floor:
        return []
    return [Violation(constraint, f"{what} {value:.4f} < {floor:g}{detail}", (floor - value) / floor)]


def output_violations(name: str, block: OutputFidelity, constraints: Constraints) -> list[Violation]:
    """One output, by the constraint that fits what it is: the decisions read off it (top-1 per position
    of class scores, flips at a threshold of probabilities, a grid's score channels by their decisions and
    its coordinates by their error against their own peak); the neighbours of an embedding and its rows'
    cosine; the worst row's cosine of other values (its error against the output's range for one value
    per row, where a cosine over the column hides a flipped row)."""
    found = _floor(block.top1_agreement, constraints.min_top1_agreement, "min_top1_agreement",
                   f"output {name}: top-1 agreement")  # fmt: skip
    whole = {"ctc": "rows whose decoded string is kept (CTC greedy: repeats merged, blank 0 dropped)",
             "strings": "rows whose strings equal the source's"}.get(
        block.output_kind or "", "rows whose class at every position is kept (a sequence read whole)")  # fmt: skip
    found += _floor(block.sequences_kept, constraints.min_top1_agreement, "min_top1_agreement",
                    f"output {name}: {whole}")  # fmt: skip
    if block.output_kind == "strings" and block.decision_flips:  # text is equal or not: no tolerance
        found.append(Violation("strings_equal", f"output {name}: {block.decision_flips} rows' strings differ from "
                               "the source's", 1.0 - (block.sequences_kept or 0.0)))  # fmt: skip
    if block.decision_f1 is not None:
        where = f"; {block.worst_decision_channel}" if block.worst_decision_channel else ""
        at = f"{block.decision_threshold:g}" + (
            "" if block.decision_logit is None else f" (logit {block.decision_logit:g})"
        )
        found += _floor(block.decision_f1, constraints.min_decision_f1, "min_decision_f1",
                        f"output {name}: F1 of the decisions at {at}",
                        f" ({block.decision_flips} flips against the source's {block.decision_positives} positives"
                        f"{where})")  # fmt: skip
    if block.channel_error is not None:  # a mixed-scale grid: the row's cosine follows its largest channels
        error, cap = block.channel_error, constraints.max_channel_error
        if cap is not None and error > cap:
            found.append(Violation("max_channel_error", f"output {name} {block.worst_channel} ({error:.3g} > {cap:g})",
                                   excess(error, cap)))  # fmt: skip
    if block.rows_within is not None:
        found += _floor(block.rows_within, constraints.min_rows_within, "min_rows_within",
                        f"output {name}: share of rows whose every point stays within {block.point_tolerance:.3g} of "
                        "the source's", f" (largest displacement {block.max_displacement:.3g} at {block.worst_point}; "
                        f"{block.points_within:.4f} of all points within)")  # fmt: skip
    if block.decides:
        return found
    found += _floor(block.neighbour_recall, constraints.min_neighbour_recall, "min_neighbour_recall",
                    f"output {name}: neighbour recall@10")  # fmt: skip
    if block.one_value_per_row:
        error, cap = block.max_rel_diff, constraints.max_rel_error
        if cap is not None and (error is None or error > cap):
            shown = "unknown" if error is None else f"{error:.4g}"
            over = float("inf") if error is None else excess(error, cap)
            found.append(Violation("max_rel_error", f"output {name}: worst row's error {shown} > {cap:g}", over))
    else:
        error, cap = block.max_rel_diff, constraints.max_value_error
        if block.output_kind == "values" and cap is not None and error is not None and error > cap:
            found.append(Violation("max_value_error", f"output {name}: largest error {error:.4g} of its largest "
                                   f"magnitude > {cap:g} (no decision found: judged by cosine and its largest error)",
                                   excess(error, cap)))  # fmt: skip
        cosine, floor = block.cosine_min, constraints.min_cosine
        if floor is not None and (cosine is None or cosine < floor):
            shown = "unknown" if cosine is None else f"{cosine:.4f}"
            over = float("inf") if cosine is None else (floor - cosine) / floor
            found.append(Violation("min_cosine", f"output {name}: worst row's cosine {shown} < {floor:g}", over))
    return found


def metric_violations(subject: Judged, constraints: Constraints) -> list[Violation]:
    """The task metric's drop against the source's, absolute (its units) or relative, as stated."""
    limit = constraints.max_metric_drop
    drop = subject.accuracy_drop if constraints.metric_drop == "absolute" else subject.accuracy_relative_drop
    if drop is None or limit is None or drop <= limit:
        return []
    how = "" if constraints.metric_drop == "absolute" else " of the source's value"
    return [Violation("max_metric_drop", f"task metric drop {drop:.4g}{how} > {limit:g}", excess(drop, limit))]


def edge_violations(edges: EdgeRows | None, constraints: Constraints) -> list[Violation]:
    """On a tree ensemble's split-threshold rows, every decision as the library's (exact_edge_decisions); an
    output that decides nothing by the constraints the scoring rows apply."""
    if edges is None or not constraints.exact_edge_decisions:
        return []
    found = []
    for name, block in edges.fidelity.items():
        changed = edges.changed(name)
        if changed is None:
            found += [Violation(v.constraint, f"on the split-threshold rows: {v.message}", v.excess)
                      for v in output_violations(name, block, constraints)]  # fmt: skip
        elif changed:
            found.append(Violation("exact_edge_decisions", f"output {name}: {changed} of {edges.rows} rows on the "
                                   f"split thresholds decided otherwise than the library ({edges.moved} moved)",
                                   changed / edges.rows))  # fmt: skip
    return found


def quality_violations(subject: Judged, constraints: Constraints) -> list[Violation]:
    """The task metric's drop when the variant has one (labels), then every output the metric does not
    read by the constraint that fits it (output_violations): a user's metric reads every output, a
    built-in one the first; the outputs it reads are judged by it, their figures context, unless
    `metric_decides` is false (then every output is judged by its decisions too)."""
    found = metric_violations(subject, constraints)
    rise, cap = subject.ppl_increase_pct, constraints.max_ppl_increase_pct
    if rise is not None and cap is not None and rise > cap:
        found.append(Violation("max_ppl_increase_pct", f"perplexity +{rise:.3g}% > +{cap:g}%", excess(rise, cap)))
    judged = list(subject.outputs.items())
    if subject.accuracy_drop is not None and constraints.metric_decides:
        judged = [] if subject.metric_reads_every_output else judged[1:]
    elif not judged and (constraints.min_cosine is not None or constraints.max_rel_error is not None):
        return [*found, Violation("min_cosine", "fidelity unknown (no outputs compared)", float("inf"))]
    for name, block in judged:
        found += output_violations(name, block, constraints)
    return found + edge_violations(subject.edge_rows, constraints)
