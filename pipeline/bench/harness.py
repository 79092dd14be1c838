"""Timing loops. They take a prepared zero-argument call, so they time the runtime and nothing else."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from pipeline.bench.stats import LatencyStats, window_spread_pct
from pipeline.config import LatencyConfig, WarmupConfig

clock = time.perf_counter_ns


def warm_up(call: Callable[[], Any], config: WarmupConfig) -> int:
    """Run until both the iteration and the time minimum are met (caches, allocators, JIT settle)."""
    start, n = clock(), 0
    while n < config.iters or clock() - start < config.seconds * 1e9:
        call()
        n += 1
    return n


@dataclass(frozen=True)
class LatencyResult:
    stats: LatencyStats
    windows: int
    spread_pct: float  # spread of the last `stable_windows` window medians
    stable: bool
    seconds: float


def measure_latency(call: Callable[[], Any], config: LatencyConfig) -> LatencyResult:
    """Time calls one by one in windows of `window_seconds`.

    Stops once `min_iters` and `min_seconds` are met and the last `stable_windows` window medians
    agree within `stability_pct`, or at `max_seconds` (the result is then flagged unstable). All
    timed calls are reported: the windows decide when to stop, not which samples count.
    """
    samples: list[int] = []
    windows: list[np.ndarray] = []
    window_ns, k = int(config.window_seconds * 1e9), config.stable_windows
    start = clock()
    while True:
        window: list[int] = []
        window_start = clock()
        while True:
            t0 = clock()
            call()
            t1 = clock()
            window.append(t1 - t0)
            if t1 - window_start >= window_ns:
                break
        samples.extend(window)
        windows.append(np.asarray(window))
        elapsed = clock() - start
        spread = window_spread_pct(windows[-k:])
        enough = len(samples) >= config.min_iters and elapsed >= config.min_seconds * 1e9 and len(windows) >= k
        if (enough and spread <= config.stability_pct) or elapsed >= config.max_seconds * 1e9:
            break
    return LatencyResult(
        LatencyStats.from_ns(np.asarray(samples)),
        windows=len(windows),
        spread_pct=spread,
        stable=len(windows) >= k and spread <= config.stability_pct,
        seconds=elapsed / 1e9,
    )


def measure_throughput(call: Callable[[], Any], batch: int, seconds: float) -> float:
    """Samples per second over at least `seconds` of back-to-back calls of one batch (wall clock)."""
    warm_up(call, WarmupConfig(iters=3, seconds=0.1 * seconds))  # a new batch size allocates at first
    n, start = 0, clock()
    while True:
        call()
        n += 1
        elapsed = clock() - start
        if elapsed >= seconds * 1e9:
            return batch * n / (elapsed / 1e9)
