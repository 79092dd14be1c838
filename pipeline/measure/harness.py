"""Timing loops. They take a prepared zero-argument call, so they time the runtime and nothing else."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from pipeline.core.config import LatencyConfig, WarmupConfig
from pipeline.measure.stats import LatencyStats, spread_pct
from pipeline.runtimes.base import AsyncQueue

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
    """Per-call timings of one or more measuring segments, with the median of each segment and window."""

    samples_ns: np.ndarray
    window_medians_ns: tuple[float, ...]
    seconds: float
    segment_medians_ns: tuple[float, ...] = ()

    @property
    def stats(self) -> LatencyStats:
        return LatencyStats.from_ns(self.samples_ns)

    @property
    def windows(self) -> int:
        return len(self.window_medians_ns)

    @property
    def noise_pct(self) -> float:
        """How far apart the p50s of segments taken seconds apart are: would a rerun repeat the p50?

        With one segment, the spread of its window medians stands in.
        """
        if len(self.segment_medians_ns) >= 2:
            return spread_pct(self.segment_medians_ns)
        return self.window_spread_pct

    @property
    def window_spread_pct(self) -> float:
        """Spread of all window medians: the largest swing the machine made under the measurement."""
        return spread_pct(self.window_medians_ns)

    @classmethod
    def combine(cls, results: list[LatencyResult]) -> LatencyResult:
        return cls(
            np.concatenate([r.samples_ns for r in results]),
            tuple(m for r in results for m in r.window_medians_ns),
            sum(r.seconds for r in results),
            tuple(m for r in results for m in r.segment_medians_ns),
        )


def measure_latency(call: Callable[[], Any], config: LatencyConfig) -> LatencyResult:
    """Time calls one by one in windows of `window_seconds` (one measuring segment).

    Stops once `min_iters` and `min_seconds` are met and the last `stable_windows` window medians
    agree within `stability_pct`, or at `max_seconds`. All timed calls are reported: the windows
    decide when to stop, not which samples count. The caller runs `config.segments` segments apart
    in time and combines them, so that one slow spell of the machine does not decide the number.
    """
    samples: list[int] = []
    medians: list[float] = []
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
        medians.append(float(np.median(window)))
        elapsed = clock() - start
        enough = len(samples) >= config.min_iters and elapsed >= config.min_seconds * 1e9 and len(medians) >= k
        if (enough and spread_pct(medians[-k:]) <= config.stability_pct) or elapsed >= config.max_seconds * 1e9:
            break
    return LatencyResult(np.asarray(samples), tuple(medians), elapsed / 1e9, (float(np.median(samples)),))


def measure_throughput(call: Callable[[], Any], batch: int, seconds: float) -> float:
    """Samples per second over at least `seconds` of back-to-back calls of one batch (wall clock),
    after one untimed call (the caller has made the first, which allocates for the new size)."""
    warm_up(call, WarmupConfig(iters=1, seconds=0.1 * seconds))
    n, start = 0, clock()
    while True:
        call()
        n += 1
        elapsed = clock() - start
        if elapsed >= seconds * 1e9:
            return batch * n / (elapsed / 1e9)


def measure_concurrent(queue: AsyncQueue, batch: int, seconds: float) -> float:
    """Samples per second with `queue.requests` requests kept in flight for at least `seconds`."""
    warm_up(queue.submit, WarmupConfig(iters=2 * queue.requests, seconds=0.1 * seconds))
    queue.wait_all()
    n, start = 0, clock()
    while clock() - start < seconds * 1e9:
        queue.submit()  # blocks while every request is busy
        n += 1
    queue.wait_all()
    return batch * n / ((clock() - start) / 1e9)
