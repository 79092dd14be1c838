"""Choose the deployment artifact: constraints first, then the Pareto front, then the objective.

Pure logic over the stored figures (the typed records under reports/details), so that it can be
tested on synthetic numbers and explained line by line. Every variant gets a reason: the first
constraint it broke, the variant that dominates it, or what the winner beat it on. This is the
screen: the select stage then re-measures the variants it cannot separate from the winner
(pipeline.decide.contest) and breaks ties with `tie_break_key`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from pipeline.core.config import Constraints, SelectConfig
from pipeline.core.quality import quality_violations
from pipeline.core.readings import Violation, excess
from pipeline.core.records import EdgeRows, OutputFidelity, Records, VariantRecord
from pipeline.core.registry import RUNTIMES


@dataclass(frozen=True)
class Candidate:
    variant: str
    runtime: str
    device: str
    latency_ms: float  # at the configured percentile
    latency_low_ms: float  # the p50's 95% interval (the percentile's own when it is not p50: none, the value)
    latency_high_ms: float
    throughput_sps: float | None  # peak over the batch sweep; None: out of contention, no sweep (record.screen)
    size_mb: float
    footprint_mb: float  # the runtime's own peak RSS (what max_memory_mb limits)
    accuracy_drop: float | None  # how much worse the task metric is than the source's (negative: better)
    fidelity: float | None  # the worst output's worst-row score vs the FP32 source (1 = identical)
    outputs: dict[str, OutputFidelity]  # the per-output fidelity the quality constraints read
    ppl_increase_pct: float | None = None  # text generation: held-out perplexity over the source's, %
    accuracy_relative_drop: float | None = None  # the task metric's drop, a fraction of the source's value
    metric_reads_every_output: bool = False  # a user's metric: every output is judged by it
    edge_rows: EdgeRows | None = None  # a tree ensemble's split-threshold rows (exact decisions there)

    @classmethod
    def from_record(cls, variant: str, record: VariantRecord, percentile: str) -> Candidate:
        """A measured (ok) variant's figures, at `percentile`."""
        latency = record.latency(percentile)
        interval = record.p50_ci_ms if percentile == "p50" else None
        assert record.size_mb is not None and record.footprint_mb is not None
        return cls(
            variant=variant,
            runtime=record.runtime,
            device=record.device,
            latency_ms=latency,
            latency_low_ms=interval.low if interval else latency,
            latency_high_ms=interval.high if interval else latency,
            throughput_sps=record.throughput_sps.peak if record.throughput_sps else None,
            size_mb=record.size_mb,
            footprint_mb=record.footprint_mb,
            accuracy_drop=record.accuracy_drop,
            fidelity=record.worst_output_score,
            outputs=record.outputs,
            ppl_increase_pct=record.perplexity.increase_pct if record.perplexity else None,
            accuracy_relative_drop=record.accuracy_relative_drop,
            metric_reads_every_output=record.metric_reads_every_output,
            edge_rows=record.edge_rows,
        )

    @property
    def dependencies(self) -> int:
        """Packages its runtime needs to serve (fewer is simpler to ship)."""
        return len(RUNTIMES[self.runtime].packages) if self.runtime in RUNTIMES else 99

    @property
    def loss(self) -> float:
        """What the variant lost against the FP32 source, lower is better: the task metric's drop
        when there are labels, else 1 - the worst output's fidelity (unknown: infinitely bad)."""
        if self.accuracy_drop is not None:
            return self.accuracy_drop
        return 1.0 - self.fidelity if self.fidelity is not None else float("inf")

    def value(self, objective: str) -> float | None:
        """What `objective` measures: latency (at the percentile), peak throughput (None: not measured,
        out of contention) or size."""
        return {"latency": self.latency_ms, "throughput": self.throughput_sps, "size": self.size_mb}[objective]

    @property
    def coordinates(self) -> tuple[float, float, float]:
        """What the Pareto front is taken over: lower is better in each."""
        return (self.latency_ms, self.loss, self.size_mb)


def violations(candidate: Candidate, constraints: Constraints, percentile: str) -> list[Violation]:
    """Broken constraints, in a fixed order: variant, runtime, device, accuracy, latency, size, memory."""
    found = []
    never = float("inf")  # a disallowed kind cannot be 'almost' met
    if constraints.variants is not None and candidate.variant not in constraints.variants:
        allowed = ", ".join(constraints.variants)
        found.append(Violation("variants", f"variant not in the allowed list ({allowed})", never))
    if constraints.runtimes is not None and candidate.runtime not in constraints.runtimes:
        allowed = ", ".join(constraints.runtimes)
        found.append(Violation("runtimes", f"runtime {candidate.runtime} not allowed ({allowed})", never))
    if constraints.devices is not None and not {candidate.device, candidate.device.partition(":")[0]} & set(
        constraints.devices
    ):
        found.append(Violation("devices", f"device {candidate.device} not allowed", never))
    found += quality_violations(candidate, constraints)
    for name, value, limit, unit in (
        ("max_latency_ms", candidate.latency_ms, constraints.max_latency_ms, f"ms ({percentile})"),
        ("max_size_mb", candidate.size_mb, constraints.max_size_mb, "MB"),
        ("max_memory_mb", candidate.footprint_mb, constraints.max_memory_mb, "MB footprint"),
    ):
        if limit is not None and value > limit:
            found.append(Violation(name, f"{value:.4g} > {limit:g} {unit}", excess(value, limit)))
    return found


def decided_by(candidate: Candidate | None, constraints: Constraints) -> str:
    """Which figures the quality constraints were checked on, for the manifest."""
    c = constraints
    every = (
        f"every output by the decisions read off it (class scores: top-1 agreement >= {c.min_top1_agreement}; "
        f"probabilities: decision F1 >= {c.min_decision_f1}; a grid: its scores' decisions and its coordinates' "
        f"error <= {c.max_channel_error}), other values by their worst scoring row vs the FP32 source (cosine >= "
        f"{c.min_cosine}; one value per row: error / range <= {c.max_rel_error})"
    )
    if candidate is not None and candidate.accuracy_drop is not None:
        drop = f"task metric drop vs the FP32 source (max_metric_drop {c.max_metric_drop}, {c.metric_drop})"
        return drop if candidate.metric_reads_every_output else f"{drop}; the other outputs: {every}"
    return f"{every}: no task metric"


def dominates(a: Candidate, b: Candidate) -> bool:
    """a is no worse than b in latency, loss (task metric drop, else 1 - fidelity), size, and better in at least one."""
    return all(x <= y for x, y in zip(a.coordinates, b.coordinates, strict=True)) and a.coordinates != b.coordinates


def pareto_front(candidates: list[Candidate]) -> list[Candidate]:
    return [c for c in candidates if not any(dominates(other, c) for other in candidates)]


def objective_key(candidate: Candidate, objective: str) -> tuple[float, ...]:
    """Sort key, best first: the objective, then accuracy, latency, size (ties are decided, not left to chance).
    A figure not measured (a throughput skipped out of contention) ranks last."""
    value = candidate.value(objective)
    primary = float("inf") if value is None else -value if objective == "throughput" else value
    return (primary, *candidate.coordinates[1:2], candidate.latency_ms, candidate.size_mb)


@dataclass
class Selection:
    chosen: str | None
    why: str
    pareto: list[str]
    rejected: dict[str, str]
    feasible: list[str]
    closest: str | None = None  # when nothing is feasible: the candidate that misses by the least
    # every measured (ok) variant, built once from its record: the contest and the records reuse them
    candidates: dict[str, Candidate] = field(default_factory=dict)


NOT_MEASURED = "throughput not measured: out of contention"
OBJECTIVE_WORDS = {"latency": "lowest {p} latency", "throughput": "highest peak throughput", "size": "smallest size"}


def _describe(c: Candidate, objective: str, percentile: str) -> str:
    return {
        "latency": f"{percentile} {c.latency_ms:.4g} ms",
        "throughput": NOT_MEASURED if c.throughput_sps is None else f"peak {c.throughput_sps:,.0f} samples/s",
        "size": f"{c.size_mb:.4g} MB",
    }[objective]


def _gap_pct(winner: Candidate, other: Candidate, objective: str) -> float | None:
    a, b = (winner.value(objective), other.value(objective))
    if a is None or b is None:
        return None
    if objective == "throughput":  # higher is better
        a, b = b, a
    return 100.0 * (b - a) / a if a else 0.0


def screen(records: Records, config: SelectConfig, constraints: Constraints) -> Selection:
    """Choose among the variants whose status is ok on their stored figures; explain the choice and
    every rejection. The select stage re-measures what this cannot separate (pipeline.decide.contest)."""
    percentile, objective = config.percentile, config.objective
    rejected: dict[str, str] = {}
    candidates: list[Candidate] = []
    for variant, record in sorted(records.items()):
        if not record.ok:
            rejected[variant] = f"status {record.status}: {record.reason}"
        else:
            candidates.append(Candidate.from_record(variant, record, percentile))
    by_name = {c.variant: c for c in candidates}
    broken = {c.variant: violations(c, constraints, percentile) for c in candidates}
    feasible = [c for c in candidates if not broken[c.variant]]
    for c in candidates:
        if broken[c.variant]:
            first = broken[c.variant][0]
            rejected[c.variant] = f"breaks {first.constraint}: {first.message}"
    front = pareto_front(feasible)
    if not feasible:
        closest = min(
            candidates, key=lambda c: (len(broken[c.variant]), sum(v.excess for v in broken[c.variant])), default=None
        )
        why = "no variant meets the constraints" + (
            f"; closest: {closest.variant} ({'; '.join(v.message for v in broken[closest.variant])})" if closest else ""
        )
        return Selection(
            None, why, [c.variant for c in front], rejected, [], closest.variant if closest else None, by_name
        )

    ranked = sorted(feasible, key=lambda c: (objective_key(c, objective), c.variant))
    winner = ranked[0]
    why = (
        f"{OBJECTIVE_WORDS[objective].format(p=percentile)} ({_describe(winner, objective, percentile)}) "
        f"of {len(feasible)} variant(s) meeting the constraints"
    )
    if len(ranked) > 1:
        runner_up = ranked[1]
        gap = _gap_pct(winner, runner_up, objective)
        ahead = "ahead" if gap is None else f"{gap:.1f}% ahead"
        why += f"; {ahead} of {runner_up.variant} ({_describe(runner_up, objective, percentile)})"
    for c in ranked[1:]:
        dominator = next((d for d in feasible if dominates(d, c)), None)
        if dominator is not None:
            rejected[c.variant] = (
                f"dominated by {dominator.variant}: {percentile} {dominator.latency_ms:.4g} vs {c.latency_ms:.4g} ms, "
                f"{_loss(dominator)} vs {_loss(c)}, "
                f"size {dominator.size_mb:.3g} vs {c.size_mb:.3g} MB"
            )
        else:
            rejected[c.variant] = (
                f"on the Pareto front, but {winner.variant} wins on the objective "
                f"({_describe(winner, objective, percentile)} vs {_describe(c, objective, percentile)})"
            )
    feasible_names = [c.variant for c in feasible]
    return Selection(winner.variant, why, [c.variant for c in front], rejected, feasible_names, candidates=by_name)


def _loss(c: Candidate) -> str:
    if c.accuracy_drop is not None:
        return f"task metric drop {c.accuracy_drop:.4g}"
    return "fidelity unknown" if c.fidelity is None else f"worst-output fidelity {c.fidelity:.4f}"


TIE_BREAK = (
    "better worst-output fidelity (to 1e-4), then smaller footprint (to 5 MB), smaller size (to 1%), "
    "fewer runtime packages, name"
)


def tie_break_key(c: Candidate) -> tuple[float, float, float, int, str]:
    """The documented order among variants the re-measure could not separate (TIE_BREAK). Measured
    figures are compared at a resolution above their run-to-run wobble, so a rerun breaks the
    same tie the same way."""
    fidelity = -round(c.fidelity, 4) if c.fidelity is not None else float("inf")
    size = round(math.log(c.size_mb), 2) if c.size_mb > 0 else float("-inf")  # 1% steps
    return (fidelity, round(c.footprint_mb / 5), size, c.dependencies, c.variant)


def overlapping(winner: Candidate, ranked: list[Candidate], limit: int, drift_ratio: float) -> list[Candidate]:
    """The winner and the next ones the stored figures cannot rule out (at most `limit` in all):
    an interval that reaches into the winner's, or a figure within `drift_ratio` of it. A benchmark's
    interval describes its own process's minutes only: on amd-25-1-2c the same-speed spam_fnn
    onnx_fp16 and onnx_opt were stored at 14.9 and 23.8 us, each with a tight interval (the machine
    sat in a fast or a slow state for a whole benchmark), and one INT8/FP32 ratio read 0.48, 0.63
    and 0.76 within an hour; so the screen keeps whatever such drift could have put behind it."""
    close = [
        c
        for c in ranked
        if c is not winner
        and (c.latency_low_ms <= winner.latency_high_ms or c.latency_ms <= drift_ratio * winner.latency_ms)
    ]
    return [winner, *close[: limit - 1]]
