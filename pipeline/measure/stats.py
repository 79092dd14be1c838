"""Latency statistics and the stability rule, from raw per-call timings."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class LatencyStats:
    """Per-call latency in milliseconds (optimum-benchmark's shape: from_values, to_dict)."""

    p50: float
    p90: float
    p99: float
    mean: float
    std: float
    min: float
    max: float
    n: int

    @classmethod
    def from_ns(cls, samples_ns: np.ndarray) -> LatencyStats:
        ms = np.asarray(samples_ns, dtype=np.float64) / 1e6
        p50, p90, p99 = np.percentile(ms, [50, 90, 99])
        return cls(
            float(p50),
            float(p90),
            float(p99),
            float(ms.mean()),
            float(ms.std(ddof=1)) if len(ms) > 1 else 0.0,
            float(ms.min()),
            float(ms.max()),
            len(ms),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "p50": self.p50,
            "p90": self.p90,
            "p99": self.p99,
            "mean": self.mean,
            "std": self.std,
            "min": self.min,
            "max": self.max,
            "n": self.n,
        }


def spread_pct(values: Sequence[float]) -> float:
    """(max - min) / min in percent; 0 for fewer than two values."""
    if len(values) < 2 or min(values) <= 0:
        return 0.0
    return 100.0 * (max(values) - min(values)) / min(values)
