"""The decision that survives drift: screen on the stored figures, re-measure what they cannot separate.

Stored figures come from benchmarks run minutes apart, and on shared machines the minutes are not equal:
identical artifacts measured 1.5x apart, and the choice followed the gap. So the winner of the screen
(pipeline.decide.selection.screen) and every feasible variant whose latency interval overlaps its own (up to
`select.contest.max_contenders`) are timed again, side by side, each in worker processes of its own as deployed,
two taking turns (pipeline.measure.contest), until the paired ratios separate them or say tie. The source's own
runtime (the registry's baseline: torch eager, LiteRT, scikit-learn ...) runs beside them whenever it is
feasible, so the speed-up a user reads for a contender is a ratio timed side by side, with its interval, never
two figures taken minutes apart. Variants that are one model (pipeline.measure.identity) are timed once; a
contender whose worker fails is rejected with its error and the others decide. Among the tied, the documented
tie-break decides (selection.TIE_BREAK), and the manifest says "tie with X (±y%)". The figures that ranked the
contenders are the ones recorded.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pipeline.core import records
from pipeline.core.config import Params
from pipeline.core.isolate import IsolatedFailure
from pipeline.core.records import Records
from pipeline.core.registry import BASELINES
from pipeline.decide.selection import (
    TIE_BREAK,
    Candidate,
    Selection,
    objective_key,
    overlapping,
    pareto_front,
    screen,
    tie_break_key,
)
from pipeline.measure.contest import identical_groups, measure_contenders, processes_that_fit


@dataclass
class Decision:
    """The screen, what the re-measure found, and the choice with its one-line reason; every variant
    not chosen with why (`rejected`), and the candidates the screen built once from their records."""

    selection: Selection
    chosen: str | None
    why: str
    contest: dict[str, Any] | None = None
    tied: list[str] = field(default_factory=list)
    identical: dict[str, str] = field(default_factory=dict)  # variant -> the one timed in its place
    latency_ms: dict[str, float] = field(default_factory=dict)  # the figures that ranked the contenders
    rejected: dict[str, str] = field(default_factory=dict)  # every variant not chosen -> why
    pareto: list[str] = field(default_factory=list)  # the front, with the contenders' re-measured latency
    # each contender's speed-up over the source's own runtime, timed beside it: {ratio, low, high} (95%)
    speedups: dict[str, dict[str, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.rejected:
            self.rejected = {v: r for v, r in self.selection.rejected.items() if v != self.chosen}
        self.pareto = self.pareto or self.selection.pareto

    @property
    def candidates(self) -> dict[str, Candidate]:
        """Every measured (ok) variant's figures, built once by the screen: deploy and the record read these."""
        return self.selection.candidates


def decide(model: str, records: Records, params: Params, root: Path = Path(".")) -> Decision:
    """Screen, then (latency objective) re-measure the contenders; returns the decision."""
    config, constraints = params.select, params.select.constraints_for(model)
    screened = screen(records, config, constraints)
    if screened.chosen is None or config.objective != "latency" or not config.contest.enabled:
        return Decision(screened, screened.chosen, screened.why)
    feasible = [screened.candidates[v] for v in screened.feasible]
    ranked = sorted(feasible, key=lambda c: (objective_key(c, "latency"), c.variant))
    close = overlapping(ranked[0], ranked, len(ranked), config.contest.drift_ratio)
    baseline = BASELINES[params.model(model).source]
    beside = [baseline] if baseline in screened.feasible and baseline not in (c.variant for c in close) else []
    groups = identical_groups([c.variant for c in close] + beside, root, model)
    timed = [rep for rep in groups if rep != baseline or not beside][: config.contest.max_contenders]
    timed += [baseline] if baseline in groups and baseline not in timed else []
    groups = {rep: groups[rep] for rep in timed}
    identical = {m: rep for rep in timed for m in groups[rep] if m != rep}
    if len(timed) == 1:
        why = f"{screened.why}; no other variant is within reach of it" + _same(identical)
        return Decision(screened, screened.chosen, why, identical=identical)
    base_rep = next((rep for rep in timed if baseline in groups[rep]), None)
    processes, fewer = processes_that_fit([records[v].peak_rss_mb for v in timed], config.contest.processes)
    try:
        contest = measure_contenders(model, timed, params, root, baseline=base_rep, processes=processes)
    except IsolatedFailure as failure:
        why = f"{screened.why}; the side-by-side re-measure failed ({failure.evidence('python -m pipeline select')})"
        return Decision(screened, screened.chosen, why, identical=identical)
    contest |= {"processes_why": fewer} if fewer else {}
    leader, ratios = contest["leader"], contest["ratio_to_leader"]
    tied_timed = [leader, *(v for v, r in ratios.items() if standing(r, config.contest.tie_pct) == "tie")]
    tied = [m for rep in tied_timed for m in groups[rep]]
    chosen = min((screened.candidates[v] for v in tied), key=tie_break_key).variant
    ran = {rep: members for rep, members in groups.items() if rep in contest["latency_ms"]}
    latency = {m: contest["latency_ms"][rep] for rep, members in ran.items() for m in members}
    speedups = {m: contest["speedup"][rep] for rep, members in ran.items() for m in members if "speedup" in contest}
    why = _why(chosen, leader, tied, contest, ran, latency, config.contest.tie_pct)
    # The front again, on the figures that ranked the contenders (the tied at one latency: the contest
    # could not tell them apart): a screen winner the contest beat no longer pushes the chosen off it.
    level = {m: latency[leader] if m in tied else ms for m, ms in latency.items()}
    front = [
        c.variant for c in pareto_front([replace(c, latency_ms=level.get(c.variant, c.latency_ms)) for c in feasible])
    ]
    rejected = _rejected(screened, chosen, contest, groups, config.contest.tie_pct)
    return Decision(screened, chosen, why, contest, tied, identical, latency, rejected, front, speedups)


def standing(ratio: dict[str, Any], tie_pct: float) -> str:
    """A contender against the leader once the contest ended: `slower` (separated), `tie` (equivalent within ±tie_pct,
    or still open at the cap, or not to close by it, with its median ratio inside that band: a difference the
    contest could not show), or `undecided` (still open, its median beyond the band): the leader keeps the
    place. Calling the last a tie let the tie-break deploy minilm_l6's openvino_fp16 from a noisy 30 s contest
    (x1.573, 95% CI 1.015-2.497) over openvino_int8, which other runs found x1.5 faster."""
    if ratio["verdict"] == "slower":
        return "slower"
    return "tie" if ratio["verdict"] == "equivalent" or ratio["ratio"] <= 1 + tie_pct / 100 else "undecided"


def _half_width_pct(ratio: dict[str, float]) -> float:
    """Half the interval's width in percent, on the log scale it was computed on."""
    return 100 * ((ratio["high"] / ratio["low"]) ** 0.5 - 1) if ratio["low"] > 0 else float("inf")


def _rejected(
    screen: Selection, chosen: str, contest: dict[str, Any], groups: dict[str, list[str]], tie_pct: float
) -> dict[str, str]:
    """The screen's reasons, except for the contenders: the side-by-side re-measure decided those
    (the screen's winner may have lost it, and the chosen one may have been 'rejected' by the screen)."""
    rejected = {v: r for v, r in screen.rejected.items() if v != chosen}
    for rep, why in contest.get("failed", {}).items():
        rejected |= {m: f"failed in the side-by-side re-measure ({why})" for m in groups.get(rep, [rep])}
    leader, ratios = contest["leader"], contest["ratio_to_leader"]
    mine = ratios.get(next(rep for rep, members in groups.items() if chosen in members))
    for rep, members in groups.items():
        r = ratios.get(rep)
        for m in (m for m in members if m != chosen and rep in contest["latency_ms"]):
            lost = standing(r, tie_pct) if r else "tie"
            if lost != "tie":
                how = "" if lost == "slower" else f"; undecided by the cap, its median beyond ±{tie_pct:g}%"
                rejected[m] = (
                    f"{lost} side by side: x{r['ratio']:.3f} of {leader} (95% CI {r['low']:.3f}-{r['high']:.3f}{how})"
                )
                continue
            if r:
                figure = f"x{r['ratio']:.3f} of {leader}, ±{_half_width_pct(r):.1f}%"
            elif mine:  # m is the leader
                figure = f"{chosen} x{mine['ratio']:.3f} of it, ±{_half_width_pct(mine):.1f}%"
            else:
                figure = "the same model"
            rejected[m] = f"tie with {chosen} side by side ({figure}); the tie-break chose {chosen}: {TIE_BREAK}"
    return rejected


def _same(identical: dict[str, str]) -> str:
    return "".join(f"; {v} is the same model as {rep} (timed once)" for v, rep in identical.items())


def _why(
    chosen: str,
    leader: str,
    tied: list[str],
    contest: dict[str, Any],
    groups: dict[str, list[str]],
    latency: dict[str, float],
    tie_pct: float,
) -> str:
    ratios, p = contest["ratio_to_leader"], contest["percentile"]
    head = f"re-measured side by side ({contest['rounds']} rounds, {contest['seconds']:.1f} s)"
    others = []
    for rep, r in sorted(ratios.items(), key=lambda item: item[1]["ratio"]):
        spread = _half_width_pct(r)
        mark = standing(r, tie_pct)
        left = contest.get("retired", {}).get(rep)
        mark += f", left the race after {left} rounds" if left else ""
        others.append(f"{rep} x{r['ratio']:.3f} (95% CI {r['low']:.3f}-{r['high']:.3f}, {mark}, ±{spread:.1f}%)")
    figures = f"{leader} {p} {latency[leader]:.4g} ms; " + "; ".join(others)
    identical = {m: rep for rep, members in groups.items() for m in members if m != rep}
    if len(tied) == 1:
        open_ = [v for v, r in ratios.items() if standing(r, tie_pct) == "undecided"]
        lead = f"the fastest median, undecided against {', '.join(open_)} by the cap," if open_ else "fastest"
        return f"{lead} when {head}: {figures}" + _same(identical)
    rivals = [v for v in tied if v != chosen]
    spreads = [_half_width_pct(ratios[v]) for v in tied if v in ratios]
    band = f" (±{max(spreads):.1f}%)" if spreads else " (the same model)"
    return f"tie with {', '.join(rivals)}{band} when {head}; chosen by the tie-break: {TIE_BREAK}. {figures}" + _same(
        identical
    )


def choose(model: str, root: str = ".") -> dict[str, Any]:
    """The select step's decision for `model` from this project's stored figures, without writing
    deploy/ (benchmarks/choice_stability.py runs it in fresh processes)."""
    from pipeline.core.config import PARAMS_FILE, load_params

    base = Path(root)
    decision = decide(model, records.load(model, base), load_params(base / PARAMS_FILE), base)
    contest = decision.contest or {"latency_ms": {}, "seconds": None}  # none: nothing was within reach
    return {
        "chosen": decision.chosen,
        "tied": decision.tied,
        "identical": decision.identical,
        "contenders": list(contest["latency_ms"]),
        "seconds": contest["seconds"],
        "why": decision.why,
    }
