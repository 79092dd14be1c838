"""The select step's decision as the record it commits (reports/selection/<model>.json).

Everything downstream reads this record, never the screen again: the report (its text, warnings and
plots), the summary and the CI gate. So it carries each measured variant's figures as the screen
ranked them, beside the choice and every rejection.
"""

from __future__ import annotations

import math

from pipeline.core import records
from pipeline.core.config import Params
from pipeline.core.records import Records
from pipeline.core.records.choice import CandidateFigures, SpeedUp
from pipeline.core.registry import BASELINES
from pipeline.decide.contest import Decision
from pipeline.decide.selection import Candidate
from pipeline.optimize.applicability import not_applicable
from pipeline.runtimes.generator import CONTEST_PROMPT, CONTEST_TOKENS


def figures(candidate: Candidate, feasible: bool) -> CandidateFigures:
    """One candidate's screen figures; an unknown loss (no metric, no fidelity) as None."""
    return CandidateFigures(
        feasible=feasible,
        latency_ms=candidate.latency_ms,
        loss=None if math.isinf(candidate.loss) else candidate.loss,
        size_mb=candidate.size_mb,
    )


def choice_record(model: str, decision: Decision, found: Records, params: Params) -> records.Choice:
    """What the select step decided for `model`, from its decision over the records `found`."""
    config = params.select
    chosen = found[decision.chosen] if decision.chosen else None
    winner = decision.candidates[decision.chosen] if decision.chosen and chosen else None
    latency = decision.latency_ms.get(decision.chosen or "", winner.latency_ms if winner else None)
    measured = "side by side with its contenders" if decision.contest else "stored benchmark figures"
    if params.model(model).generates and decision.contest:
        measured += f" (per output token of a {CONTEST_TOKENS}-token reply to a {CONTEST_PROMPT}-token prompt)"
    feasible = decision.selection.feasible
    return records.Choice(
        status="ok" if decision.chosen else "none",
        chosen=decision.chosen or "none",
        runtime=chosen.runtime if chosen else "",
        objective=f"{config.objective}" + (f" ({config.percentile})" if config.objective == "latency" else ""),
        value=(latency if config.objective == "latency" else winner.value(config.objective)) if winner else None,
        latency_ms=latency,
        measured=measured,
        tied_with=[v for v in decision.tied if v != decision.chosen],
        accuracy_delta=chosen.accuracy_delta if chosen else None,
        ppl_increase_pct=winner.ppl_increase_pct if winner else None,
        fidelity=winner.fidelity if winner else None,
        size_mb=winner.size_mb if winner else None,
        feasible=len(feasible),
        candidates=len(decision.candidates),
        reason="" if decision.chosen else decision.why,
        why=decision.why,
        rejected=decision.rejected,
        pareto_front=decision.pareto,
        not_applicable={variant: skip.reason for variant, skip in not_applicable(params, model).items()},
        figures={v: figures(c, v in feasible) for v, c in decision.candidates.items()},
        baseline=BASELINES[params.model(model).source],
        speedups={v: SpeedUp.model_validate(r) for v, r in decision.speedups.items()},
    )
