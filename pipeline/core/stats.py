"""Latency statistics and their uncertainty, from raw per-call timings.

A figure that decides carries a confidence interval. Calls are timed in consecutive blocks; the
block statistics are treated as (nearly) independent observations (batch means, Law & Kelton), so
that a slow spell of the machine widens the interval instead of hiding in millions of correlated
calls. The interval is the distribution-free one of their median (order statistics, binomial
ranks), not a t interval of their mean: on these machines the blocks are heavy-tailed (a CPU that
flips between two speed states every few hundred ms puts some blocks 2x off), and the t interval
of a small model's p50 stayed at ±4-7% where the median's was ±0.5%.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

CONFIDENCE = 0.95
MIN_BLOCKS = 6  # the fewest values whose median has a 95% order-statistic interval


@dataclass(frozen=True)
class Interval:
    """A `confidence` interval [low, high] around `center` from `blocks` block statistics."""

    center: float
    low: float
    high: float
    blocks: int
    confidence: float = CONFIDENCE

    @property
    def half_width_pct(self) -> float:
        """Half the interval's width relative to its center, in percent (inf when unknown)."""
        if self.blocks < MIN_BLOCKS or self.center <= 0:
            return float("inf")
        return 100.0 * (self.high - self.low) / 2.0 / self.center

    def overlaps(self, other: Interval) -> bool:
        return self.low <= other.high and other.low <= self.high

    def to_dict(self) -> dict[str, Any]:
        return {"low": self.low, "high": self.high, "half_width_pct": self.half_width_pct, "blocks": self.blocks}


def _median_bounds(values: np.ndarray, confidence: float) -> tuple[float, float] | None:
    """The order statistics that hold the median with at least `confidence` (None: too few values)."""
    from scipy import special  # here: 0.1 s of an import the contest's worker processes never need

    n = len(values)
    # k = the binomial(n, 1/2) quantile at alpha/2: P(fewer than k values below the median) <= alpha/2
    k = int(np.argmax(special.bdtr(np.arange(n + 1), n, 0.5) >= (1 - confidence) / 2)) if n else 0
    if k < 1:
        return None
    ordered = np.sort(values)
    return float(ordered[k - 1]), float(ordered[n - k])


def median_interval(block_values: Sequence[float], center: float, confidence: float = CONFIDENCE) -> Interval:
    """Interval of the median of per-block statistics, placed around `center` (the pooled figure)."""
    values = np.asarray(block_values, dtype=np.float64)
    bounds = _median_bounds(values, confidence)
    if bounds is None:
        return Interval(center, -np.inf, np.inf, len(values), confidence)
    return Interval(center, min(bounds[0], center), max(bounds[1], center), len(values), confidence)


def ratio_interval(ratios: Sequence[float], confidence: float = CONFIDENCE) -> Interval:
    """Interval of a paired ratio (B/A per round) from its rounds: the median ratio and its
    order-statistic interval (a ratio's median is the back-transformed median of its logs, so 1.10
    and 1/1.10 are equally far from a tie)."""
    values = np.asarray(ratios, dtype=np.float64)
    center = float(np.median(values)) if len(values) else float("nan")
    bounds = _median_bounds(values, confidence)
    if bounds is None:
        return Interval(center, 0.0, np.inf, len(values), confidence)
    return Interval(center, *bounds, len(values), confidence)


def paired_ratio_interval(ratios: Sequence[float], segments: int = 5, confidence: float = CONFIDENCE) -> Interval:
    """The per-round ratio's interval widened by its drift over time: the rounds are cut into
    `segments` consecutive stretches and a t interval over the stretches' median log ratios is
    joined to the rounds' order-statistic one. On these machines a ratio depends on the machine's
    state (two CNN graphs with the same kernels read 1.004 and 1.072 in contests a minute apart,
    each with a ±2% interval over its rounds): rounds within one state agree and look precise, so
    only a ratio that held across the contest's stretches is called separated."""
    robust = ratio_interval(ratios, confidence)
    values = np.asarray(ratios, dtype=np.float64)
    if len(values) < 2 * segments:
        return robust
    from scipy import special  # not scipy.stats: its import takes ~1.2 s

    logs = np.log([float(np.median(chunk)) for chunk in np.array_split(values, segments)])
    half = float(special.stdtrit(segments - 1, 0.5 + confidence / 2) * logs.std(ddof=1) / np.sqrt(segments))
    low, high = float(np.exp(logs.mean() - half)), float(np.exp(logs.mean() + half))
    return Interval(robust.center, min(robust.low, low), max(robust.high, high), len(values), confidence)


def spread_pct(values: Sequence[float]) -> float:
    """(max - min) / min in percent; 0 for fewer than two values."""
    if len(values) < 2 or min(values) <= 0:
        return 0.0
    return 100.0 * (max(values) - min(values)) / min(values)
