"""Choose the deployment artifact: constraints first, then the Pareto front, then the objective.

Pure logic over metrics dictionaries (the files under reports/metrics), so that it can be tested on
synthetic numbers and explained line by line. Every variant gets a reason: the first constraint it
broke, the variant that dominates it, or what the winner beat it on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipeline.core.config import Constraints, SelectConfig
from pipeline.core.evaluate import worst_cosine

Metrics = dict[str, Any]


@dataclass(frozen=True)
class Candidate:
    variant: str
    runtime: str
    device: str
    latency_ms: float  # at the configured percentile
    throughput_sps: float  # peak over the batch sweep
    size_mb: float
    memory_mb: float
    accuracy_drop: float | None  # source metric minus variant metric (negative: the variant scores higher)
    cosine: float | None  # the lowest cosine_mean over the outputs (fidelity to the FP32 source)
    noise_pct: float

    @classmethod
    def from_metrics(cls, variant: str, metrics: Metrics, percentile: str) -> Candidate:
        delta = (metrics.get("accuracy") or {}).get("delta")
        return cls(
            variant=variant,
            runtime=metrics["runtime"],
            device=metrics["device"],
            latency_ms=metrics["latency_ms"][percentile],
            throughput_sps=metrics["throughput_sps"]["peak"],
            size_mb=metrics["size_mb"],
            memory_mb=metrics["peak_rss_mb"],
            accuracy_drop=None if delta is None else -delta,
            cosine=worst_cosine(metrics.get("fidelity")),
            noise_pct=metrics.get("noise_pct", 0.0),
        )

    @property
    def loss(self) -> float:
        """What the variant lost against the FP32 source, lower is better: the task metric's drop
        when there are labels, else 1 - the worst output cosine (unknown: infinitely bad)."""
        if self.accuracy_drop is not None:
            return self.accuracy_drop
        return 1.0 - self.cosine if self.cosine is not None else float("inf")

    def value(self, objective: str) -> float:
        """What `objective` measures: latency (at the percentile), peak throughput or size."""
        return {"latency": self.latency_ms, "throughput": self.throughput_sps, "size": self.size_mb}[objective]

    @property
    def coordinates(self) -> tuple[float, float, float]:
        """What the Pareto front is taken over: lower is better in each."""
        return (self.latency_ms, self.loss, self.size_mb)


@dataclass(frozen=True)
class Violation:
    constraint: str
    message: str
    excess: float  # how far past the limit, relative (0.2 = 20% over); inf for a disallowed kind


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
        ("max_memory_mb", candidate.memory_mb, constraints.max_memory_mb, "MB peak RSS"),
    ):
        if limit is not None and value > limit:
            found.append(Violation(name, f"{value:.4g} > {limit:g} {unit}", _excess(value, limit)))
    return found


def quality_violations(candidate: Candidate, constraints: Constraints) -> list[Violation]:
    """The task metric's drop when the variant has one (labels), else every output's cosine."""
    drop, limit = candidate.accuracy_drop, constraints.max_accuracy_drop
    if drop is not None:
        if limit is not None and drop > limit:
            return [Violation("max_accuracy_drop", f"accuracy drop {drop:.4g} > {limit:g}", _excess(drop, limit))]
        return []
    cosine, floor = candidate.cosine, constraints.min_cosine
    if floor is None:
        return []
    if cosine is None:
        return [Violation("min_cosine", "fidelity unknown (no outputs compared)", float("inf"))]
    if cosine < floor:
        return [Violation("min_cosine", f"output cosine {cosine:.4f} < {floor:g}", (floor - cosine) / floor)]
    return []


def decided_by(candidate: Candidate | None, constraints: Constraints) -> str:
    """Which fidelity figure the quality constraint was checked on, for the manifest."""
    if candidate is not None and candidate.accuracy_drop is not None:
        return f"accuracy drop vs the FP32 source (max_accuracy_drop {constraints.max_accuracy_drop})"
    return f"cosine_mean of every output vs the FP32 source (min_cosine {constraints.min_cosine}): no task metric"


def _excess(value: float, limit: float) -> float:
    return (value - limit) / abs(limit) if limit else float("inf")


def dominates(a: Candidate, b: Candidate) -> bool:
    """a is no worse than b in latency, accuracy drop and size, and better in at least one."""
    return all(x <= y for x, y in zip(a.coordinates, b.coordinates, strict=True)) and a.coordinates != b.coordinates


def pareto_front(candidates: list[Candidate]) -> list[Candidate]:
    return [c for c in candidates if not any(dominates(other, c) for other in candidates)]


def objective_key(candidate: Candidate, objective: str) -> tuple[float, ...]:
    """Sort key, best first: the objective, then accuracy, latency, size (ties are decided, not left to chance)."""
    primary = -candidate.value(objective) if objective == "throughput" else candidate.value(objective)
    return (primary, *candidate.coordinates[1:2], candidate.latency_ms, candidate.size_mb)


@dataclass
class Selection:
    chosen: str | None
    why: str
    pareto: list[str]
    rejected: dict[str, str]
    feasible: list[str]
    closest: str | None = None  # when nothing is feasible: the candidate that misses by the least


OBJECTIVE_WORDS = {"latency": "lowest {p} latency", "throughput": "highest peak throughput", "size": "smallest size"}


def _describe(c: Candidate, objective: str, percentile: str) -> str:
    return {
        "latency": f"{percentile} {c.latency_ms:.4g} ms",
        "throughput": f"peak {c.throughput_sps:,.0f} samples/s",
        "size": f"{c.size_mb:.4g} MB",
    }[objective]


def _gap_pct(winner: Candidate, other: Candidate, objective: str) -> float:
    a, b = (winner.value(objective), other.value(objective))
    if objective == "throughput":  # higher is better
        a, b = b, a
    return 100.0 * (b - a) / a if a else 0.0


def select(metrics: dict[str, Metrics], config: SelectConfig, constraints: Constraints) -> Selection:
    """Choose among the variants whose status is ok; explain the choice and every rejection."""
    percentile, objective = config.percentile, config.objective
    rejected: dict[str, str] = {}
    candidates: list[Candidate] = []
    for variant, m in sorted(metrics.items()):
        if m.get("status") != "ok":
            rejected[variant] = f"status {m.get('status')}: {m.get('reason', '')}"
        else:
            candidates.append(Candidate.from_metrics(variant, m, percentile))
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
        return Selection(None, why, [c.variant for c in front], rejected, [], closest.variant if closest else None)

    ranked = sorted(feasible, key=lambda c: (objective_key(c, objective), c.variant))
    winner = ranked[0]
    why = (
        f"{OBJECTIVE_WORDS[objective].format(p=percentile)} ({_describe(winner, objective, percentile)}) "
        f"of {len(feasible)} variant(s) meeting the constraints"
    )
    if len(ranked) > 1:
        runner_up = ranked[1]
        gap = _gap_pct(winner, runner_up, objective)
        why += f"; {gap:.1f}% ahead of {runner_up.variant} ({_describe(runner_up, objective, percentile)})"
        noise = max(winner.noise_pct, runner_up.noise_pct)
        if objective != "size" and gap <= noise:
            why += f", within this run's measurement noise (±{noise:.0f}%): practically a tie"
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
    return Selection(winner.variant, why, [c.variant for c in front], rejected, [c.variant for c in feasible])


def _loss(c: Candidate) -> str:
    if c.accuracy_drop is not None:
        return f"accuracy drop {c.accuracy_drop:.4g}"
    return "cosine unknown" if c.cosine is None else f"cosine {c.cosine:.4f}"
