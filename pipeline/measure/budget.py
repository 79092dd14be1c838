"""How much a bench measures: to the precision the decision needs, once.

The select stage decides among the variants its screen cannot separate by timing them again side by
side (pipeline.decide.contest); a bench's own figures only decide who enters that contest. So:

- **Out of contention.** A variant whose batch-1 p50 interval starts above `bench.contention_ratio`
  times the top of the best known p50 interval (another variant of the same model, measured ok on this
  machine, keeping the quality constraints) cannot win on latency: its latency loop stops as soon as
  that is clear (at `min_blocks`), and it skips the throughput sweep, the concurrent figure and the dim
  sweep, which decide nothing for it. Its record says so (`screen`). Never with select.objective
  throughput, where the sweep is the figure that decides.
- **Fidelity rows.** Without labels, fidelity is a worst-row figure, and the worst of n rows already
  bounds the rest: the chance that more than a fraction q of all rows score worse than it is (1-q)^n.
  So n = ceil(ln(alpha) / ln(1-q)) rows (299 for q = 0.01, alpha = 0.05) say what thousands would.
  A variant out of contention decides nothing with its fidelity: it gets the looser bound of
  `out_of_contention_fraction` (0.05: 59 rows), enough to show a broken variant broken.
  With labels every row is kept: the accuracy delta needs them. The rows run at the variant's
  peak-throughput batch (at most `bench.eval_batch`), where it runs fast.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from pipeline.core import records
from pipeline.core.config import BenchConfig, Constraints, Params, UnlabelledRows
from pipeline.core.memory import batch_size
from pipeline.core.quality import quality_violations
from pipeline.core.records import EvalRows, Records, Screen
from pipeline.core.stats import Interval


@dataclass(frozen=True)
class Rival:
    """Another variant's stored batch-1 p50 and its 95% interval, ms: what a bench is compared with."""

    variant: str
    p50: float
    low: float
    high: float

    def describe(self) -> str:
        return f"{self.variant}'s p50 {self.p50:.4g} ms ({self.low:.4g}-{self.high:.4g})"


def best_known(found: Records, machine: str | None, exclude: str, constraints: Constraints) -> Rival | None:
    """The model's other variant, measured ok on `machine` with a p50 interval, whose interval tops out
    lowest; None when there is none. One that breaks a quality constraint cannot win, so it puts
    nobody out of contention. Records of another machine describe other hardware."""
    known = [
        Rival(variant, r.p50_ms, r.p50_ci_ms.low, r.p50_ci_ms.high)
        for variant, r in found.items()
        if variant != exclude
        and r.ok
        and machine is not None
        and r.machine == machine
        and r.p50_ci_ms is not None
        and not quality_violations(r, constraints)
    ]
    return min(known, key=lambda rival: (rival.high, rival.variant), default=None)


def out_of_contention(low: float, best_high: float, ratio: float) -> bool:
    """A p50 interval starting at `low` lies clearly beyond the best known one ending at `best_high`:
    beyond what the two intervals allow, by `ratio` (room for the drift between benchmarks run
    minutes apart, which one process's interval does not see)."""
    return low > ratio * best_high


@dataclass(frozen=True)
class ContentionScreen:
    """The out-of-contention rule for one bench: against `best` at `ratio`. `off`: why every figure is
    measured whatever the latency (the objective needs the sweep, the screen is switched off)."""

    best: Rival | None = None
    ratio: float | None = None
    off: str = ""

    def judge(self, interval: Interval) -> Screen:
        """The budget this variant's p50 interval earns, with the reason in words."""
        if self.off:
            return Screen(budget="full", reason=self.off)
        if self.best is None or self.ratio is None:
            return Screen(
                budget="full",
                reason="no other variant of this model measured ok on this machine within the quality "
                "constraints to compare with",
            )
        best, mine = self.best, f"p50 {interval.center:.4g} ms ({interval.low:.4g}-{interval.high:.4g})"
        if not out_of_contention(interval.low, best.high, self.ratio):
            return Screen(
                budget="full",
                reason=f"within reach: {mine} does not start above {self.ratio:g}x the top of {best.describe()}",
                best_known=best.variant,
            )
        return Screen(
            budget="short",
            reason=f"out of contention: {mine} is {interval.center / best.p50:.1f}x {best.describe()} and starts "
            f"above {self.ratio:g}x its top; latency timed to its minimum blocks, no throughput, concurrent or "
            "dim sweep",
            best_known=best.variant,
        )

    def stop(self, interval: Interval) -> str | None:
        """For the latency loop (harness.measure_latency's `enough`): why to stop now, or None."""
        short = self.judge(interval).budget == "short"
        return "out of contention (the record's screen says why)" if short else None


def contention_screen(params: Params, model: str, variant: str, root: Path) -> ContentionScreen:
    """The screen for `variant` of `model`, against the records already written under `root`."""
    if params.select.objective == "throughput":
        return ContentionScreen(off="select.objective is throughput: the sweep is the figure that decides")
    if params.bench.contention_ratio is None:
        return ContentionScreen(off="bench.contention_ratio is null: the screen is off")
    try:
        found = records.load(model, root)
    except ValueError as error:  # a record this version cannot read must not fail this variant's bench
        return ContentionScreen(off=f"the model's records could not be read ({type(error).__name__}): no screen")
    constraints = params.select.constraints_for(model)
    best = best_known(found, records.machine_name(root), variant, constraints)
    return ContentionScreen(best, params.bench.contention_ratio)


def rows_bounding_worst(worse_fraction: float, alpha: float) -> int:
    """The fewest rows n whose worst one bounds the rest: the chance that more than `worse_fraction`
    of all rows score worse than the worst of n is (1 - worse_fraction)^n, at most `alpha`."""
    return math.ceil(math.log(alpha) / math.log1p(-worse_fraction))


def eval_rows(available: int, labelled: bool, config: UnlabelledRows, short: bool = False) -> EvalRows:
    """How many of the `available` scoring rows accuracy and fidelity run on, and the rule that says so.
    `short`: the variant is out of contention, its fidelity decides nothing: the looser bound."""
    if labelled:
        return EvalRows(used=available, available=available, rule="every labelled row: the accuracy delta needs them")
    fraction = config.out_of_contention_fraction if short else config.worse_fraction
    n = rows_bounding_worst(fraction, config.alpha)
    bound = (
        f"the worst of {n} rows bounds the rest: at most a {config.alpha:g} chance that more than "
        f"{fraction:g} of all rows score worse (ceil(ln {config.alpha:g} / ln(1 - {fraction:g})))"
        + (", the bound for a variant out of contention" if short else "")
    )
    if n >= available:
        return EvalRows(
            used=available, available=available, rule=f"every unlabelled row (no more than {n}: {bound})", bound=n
        )
    return EvalRows(used=n, available=available, rule=f"the first {n} unlabelled rows: {bound}", bound=n)


def eval_batch(peak_batch: int | None, bench: BenchConfig, max_batch: int | None, fixed: int | None) -> int:
    """The batch the accuracy and fidelity pass runs at: the variant's peak-throughput batch when it had a
    sweep (where it runs fast), at most `bench.eval_batch`, else `bench.eval_batch`; capped to what fits,
    exactly the fixed batch of a fixed-batch model."""
    return batch_size(min(peak_batch or bench.eval_batch, bench.eval_batch), max_batch, fixed)
