"""Did a variant keep the FP32 source's answers? The quality constraints (select.constraints), judged
on a variant's measured record or on a selection candidate alike: the select stage rejects a variant
that breaks one, and a fallback's build (a variant that `rescues` another in the registry) does its
expensive work only when the variant it rescues broke one."""

from __future__ import annotations

from typing import Protocol

from pipeline.core.config import Constraints
from pipeline.core.readings import Violation, excess, reading
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


def output_violations(name: str, block: OutputFidelity, constraints: Constraints) -> list[Violation]:
    """One output, by the constraints of what it was read as (pipeline.core.readings: the decisions read off it,
    or how alike it stays where it decides nothing)."""
    return reading(block.output_kind).violations(name, block, constraints)


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
