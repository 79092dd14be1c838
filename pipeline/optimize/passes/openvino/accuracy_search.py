"""What openvino_int8_acc's searches are judged by and bounded by, shared by NNCF's accuracy control
(accuracy_control.py) and the ranked fallback that replaces it when NNCF fails (ranked_fallback.py): the
pass's knobs (Int8AccuracyConfig) and NNCF's validation function (Validation), which keeps the budget and
stops a search that cannot finish in it (SearchStopped).
"""

from __future__ import annotations

import time
from typing import Any, Literal

import numpy as np
from pydantic import Field

from pipeline.core.data import Arrays, concat, padded_batches
from pipeline.optimize.passes.base import BuildContext
from pipeline.optimize.passes.openvino.quantize import Int8Config, model_feed


class Int8AccuracyConfig(Int8Config):
    max_drop: float = Field(default=0.01, gt=0)
    drop_type: Literal["absolute", "relative"] = "absolute"
    max_num_iterations: int = Field(default=500, ge=1)
    # the search's budget in steps: the seconds its first step took (compiling the FP32 model and validating it on
    # every validation row) times this, so a model twice as slow gets twice the seconds; null: max_seconds alone
    steps: float | None = Field(default=30, gt=0)
    max_seconds: float | None = Field(default=600, gt=0)  # the budget's cap; null: no bound but the build timeout
    # each group of quantized operations NNCF ranks adds this to max_seconds: a model with many layers gets
    # a budget that fits it (a paddle2onnx detector's 71 groups stopped at 120 s, 34 s short of ranking them)
    seconds_per_group: float = Field(default=2.0, ge=0)
    # start only when plain INT8's figure on its scoring rows lies within this of max_drop's bound (its drop at most
    # max_drop + reach; without a task metric, its decision score at least 1 - max_drop - reach): no search on the
    # corpus closed a gap of 0.18 or more; null: search whatever the start
    reach: float | None = Field(default=0.1, gt=0)


class SearchStopped(Exception):
    """Accuracy control out of its budget, or projected to miss max_drop within it."""


class Validation:
    """NNCF's validation function over the validation rows (never the scoring rows), one value per item.

    The figure is the build's search goal (pipeline.core.evaluate.SearchGoal): the task metric when the
    model has one and the rows carry labels (1 - it when lower is better: NNCF takes higher as better),
    otherwise the worst output's decision score against the FP32 source (top-1 agreement of class
    scores, the F1 of probabilities' decisions at their threshold, a grid's worse of its scores' F1 and
    1 - its coordinates' error, the rows whose points stay; the worse of the worst row's cosine and 1 - the
    largest error of values no reading fits). The aggregate is that figure
    over all the items' rows together (an F1 or an error rate is not a mean of per-row figures), each
    item's value the figure on its own rows: `max_drop: 0.005` asks for a decision score of 0.995.

    `max_seconds` bounds the search, and it stops sooner once it cannot finish in time: while NNCF
    ranks the groups of quantized operations (one validation per group, before any is reverted), when
    the groups left at the pace so far need more than the seconds left; once it reverts, after two
    reverted models were validated on every row, when the gain per second since the first of them,
    projected over the seconds left, cannot reach the FP32 value minus max_drop (absolute). Either
    way the next call raises SearchStopped (`stop_reason` says which bound): NNCF returns a model only
    once it meets max_drop, so the one it holds by then does not, and its ranking would go on
    compiling models whatever the validation answered. Never before the first quantized model was
    validated: when that one meets max_drop there is no search to stop.
    """

    def __init__(
        self,
        ctx: BuildContext,
        max_seconds: float | None = None,
        max_drop: float | None = None,
        seconds_per_group: float = 0.0,
        model: Any = None,
        steps: float | None = None,
    ) -> None:
        self.goal = ctx.search_goal()
        rows = self.goal.rows
        self.metric = self.goal.what
        size = ctx.fixed_batch or 1
        chunks = padded_batches(rows.inputs, size)
        starts = range(0, len(rows), size)
        feed = (lambda inputs: model_feed(inputs, model)) if model is not None else dict  # the inputs it takes
        self.items = [
            (feed(ctx.model_inputs(chunk)), (start, real)) for start, (chunk, real) in zip(starts, chunks, strict=True)
        ]
        self.output_names, self.rows_out = list(rows.outputs), ctx.rows_out
        self.seconds_per_group, self.granted = seconds_per_group, False
        self.samples = len(rows)
        self.origin = rows.origin
        self.max_seconds, self.steps = max_seconds, steps
        self.budget_how = f"max_seconds {max_seconds:g} s" if max_seconds else "no bound but the build timeout"
        self.started = time.monotonic()
        self.max_drop = max_drop  # absolute: the value to reach is the FP32 model's minus this
        self.whole: list[tuple[float, float]] = []  # (seconds, value) of each model validated on every row
        self.stop_reason: str | None = None
        self.ranking: list[float] | None = None  # while NNCF ranks groups: [groups, scored, started]

    def score(self, outputs: Arrays, where: list[tuple[int, int]]) -> float:
        """The goal's figure of `outputs` (rows first, the items' real rows in order) on the rows `where`
        ((start, count) per item) names."""
        rows = np.concatenate([np.arange(start, start + real) for start, real in where])
        return self.goal.figure(outputs, self.goal.rows.take(rows, self.goal.rows.origin))

    def aggregate(self, runs: list[tuple[Arrays, tuple[int, int]]]) -> float:
        """The figure over every item's rows together: an F1 or an error rate is no mean of per-item ones."""
        return self.score(concat([outputs for outputs, _ in runs]), [where for _, where in runs])

    def __call__(self, compiled: Any, items: Any) -> tuple[float, list[float]]:
        if len(self.whole) >= 2 and self._should_stop():
            raise SearchStopped(self.stop_reason)
        runs = [(self.run(compiled, inputs, where[1]), where) for inputs, where in items]
        values = [self.score(outputs, [where]) for outputs, where in runs]
        result = self.aggregate(runs), values
        if self.ranking is not None:
            self.ranking[1] += 1  # one group's score (a model with that group reverted, on the ranking subset)
        elif len(values) == len(self.items):
            self.whole.append((time.monotonic() - self.started, result[0]))
            if len(self.whole) == 1 and self.steps:
                self._scale_budget(self.whole[0][0])
        return result

    def _scale_budget(self, step: float) -> None:
        """The budget from the first step's seconds (the FP32 model compiled and validated on every row)."""
        scaled = self.steps * step
        if self.max_seconds is None or scaled < self.max_seconds:
            self.max_seconds = scaled
            self.budget_how = f"{self.steps:g} steps of {step:.2f} s (its first: FP32 compiled and validated)"
        else:
            self.budget_how += f" (the cap: {self.steps:g} steps of {step:.2f} s would be {scaled:.0f} s)"

    def rows_first(self, outputs: list[np.ndarray]) -> Arrays:
        """The compiled model's outputs (in its own layout) rows first, by output name."""
        return self.rows_out(dict(zip(self.output_names, outputs, strict=True)))

    def ranking_started(self, groups: int) -> None:
        """NNCF starts ranking `groups` groups: the budget grows by seconds_per_group for each."""
        if self.max_seconds and self.ranking is None and not self.granted:
            self.max_seconds += self.seconds_per_group * groups
            self.granted = True  # once: a second ranking gets no more
        self.ranking = [groups, 0, time.monotonic()]

    @property
    def fp32_value(self) -> float | None:
        """The source's value: NNCF validates it on every row first (after a one-item probe)."""
        return self.whole[0][1] if self.whole else None

    def _should_stop(self) -> bool:
        """Out of seconds, or the search's pace cannot reach the target in the seconds left."""
        elapsed = time.monotonic() - self.started
        if not self.max_seconds:
            return False
        if elapsed > self.max_seconds:
            self.stop_reason = f"its budget: {self.max_seconds:.0f} s spent ({self.budget_how})"
            return True
        left = self.max_seconds - elapsed
        if self.ranking is not None:  # NNCF scores every group before it reverts any
            groups, scored, since = self.ranking
            needs = (time.monotonic() - since) / scored * (groups - scored) if scored >= 2 else 0.0
            if needs > left:
                self.stop_reason = (
                    f"projected: ranking {groups:.0f} groups of quantized operations needs about {needs:.0f} s "
                    f"more ({scored:.0f} scored), past the {left:.0f} s left of its budget ({self.budget_how})"
                )
                return True
            return False
        # whole[0]: FP32, whole[1]: the quantized model, then one per model with reverted operations
        if self.max_drop is None or len(self.whole) < 4:
            return False
        target = self.whole[0][1] - self.max_drop
        (t0, v0), (t1, v1) = self.whole[2], self.whole[-1]
        if v1 >= target:
            return False
        pace = (v1 - v0) / (t1 - t0) if t1 > t0 else 0.0
        if pace <= 0 or (target - v1) / pace > left:
            self.stop_reason = (
                f"projected: {self.metric} {v1:.4g} after {len(self.whole) - 2} reverts, gaining "
                f"{pace:.3g}/s; reaching {target:.4g} needs more than the {left:.0f} s left of its budget "
                f"({self.budget_how})"
            )
            return True
        return False

    def run(self, compiled: Any, inputs: Arrays, real: int) -> Arrays:
        """The compiled model's outputs for one item, rows first, without its padding rows (a fixed batch)."""
        result = compiled(dict(enumerate(inputs.values())))
        outputs = self.rows_first([np.asarray(result[port]) for port in compiled.outputs])
        return {name: value[:real] for name, value in outputs.items()}
