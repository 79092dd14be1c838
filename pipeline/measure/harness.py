"""Timing loops. They take a prepared zero-argument call, so they time the runtime and nothing else.

Every loop times calls in consecutive blocks and stops by itself: once the confidence interval of
its figure (pipeline.core.stats, the median over the blocks) is as narrow as asked, or at a time
cap. A 20 us model is done in well under a second; a 100 ms model takes the calls it needs. The
garbage collector is off inside timed blocks (a collection would land in one call's figure).
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from pipeline.core.config import BenchConfig, LatencyConfig, ThroughputConfig, WarmupConfig
from pipeline.core.records import LatencyStats
from pipeline.core.stats import Interval, median_interval
from pipeline.runtimes.base import AsyncQueue, ThreadQueue

clock = time.perf_counter_ns


@contextmanager
def no_gc() -> Iterator[None]:
    """Collect now, then keep the collector out of the timed calls."""
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def warm_up(call: Callable[[], Any], config: WarmupConfig) -> int:
    """Run until both the iteration and the time minimum are met (caches, allocators, JIT settle)."""
    start, n = clock(), 0
    while n < config.iters or clock() - start < config.seconds * 1e9:
        call()
        n += 1
    return n


def seconds_per_call(call: Callable[[], Any], probe_calls: int = 3) -> float:
    """A call's duration from a few timed calls (never zero)."""
    start = clock()
    for _ in range(probe_calls):
        call()
    return max((clock() - start) / probe_calls / 1e9, 1e-7)


def calls_per_block(call: Callable[[], Any], block_seconds: float, probe_calls: int = 3) -> int:
    """How many calls fill a block of `block_seconds` (at least one), from a few timed calls."""
    return max(1, int(block_seconds / seconds_per_call(call, probe_calls)))


@dataclass(frozen=True)
class LatencyResult:
    """Per-call timings in blocks, the median of each block, and why the loop stopped."""

    samples_ns: np.ndarray
    block_medians_ns: tuple[float, ...]
    seconds: float
    stopped_by: str = ""

    @property
    def stats(self) -> LatencyStats:
        return LatencyStats.from_ns(self.samples_ns)

    @property
    def p50_interval(self) -> Interval:
        """95% interval of the p50 (ms): would a rerun in this process repeat it?"""
        return median_interval([m / 1e6 for m in self.block_medians_ns], self.stats.p50)

    @property
    def blocks(self) -> int:
        return len(self.block_medians_ns)


def measure_latency(
    call: Callable[[], Any], config: LatencyConfig, enough: Callable[[Interval], str | None] | None = None
) -> LatencyResult:
    """Time calls one by one in blocks of about `block_seconds`; stop when the p50's interval
    half-width is within `target_pct` (after `min_blocks` blocks and `min_seconds`), or at
    `max_seconds`. All timed calls are reported: the blocks decide when to stop, not which count.
    `enough`, given the p50's interval at each of those checks, may stop the loop earlier by returning
    why (pipeline.measure.budget: a variant out of contention needs no tighter figure)."""
    per_block = calls_per_block(call, config.block_seconds)
    blocks: list[np.ndarray] = []
    medians: list[float] = []
    with no_gc():
        start = clock()
        while True:
            times = np.empty(per_block, dtype=np.int64)
            for i in range(per_block):
                t0 = clock()
                call()
                times[i] = clock() - t0
            blocks.append(times)
            medians.append(float(np.median(times)))
            elapsed = clock() - start
            if len(blocks) >= config.min_blocks and elapsed >= config.min_seconds * 1e9:
                samples = np.concatenate(blocks)
                interval = median_interval(medians, float(np.median(samples)))
                # `enough` judges in ms, as every recorded latency is (the loop's clock counts ns)
                in_ms = median_interval([m / 1e6 for m in medians], float(np.median(samples)) / 1e6)
                reason = enough(in_ms) if enough else None
                if reason:
                    stopped_by = reason
                    break
                if interval.half_width_pct <= config.target_pct:
                    stopped_by = f"p50 within ±{interval.half_width_pct:.2f}% (target {config.target_pct:g}%)"
                    break
            if elapsed >= config.max_seconds * 1e9:
                stopped_by = f"time cap {config.max_seconds:g} s"
                break
    return LatencyResult(np.concatenate(blocks), tuple(medians), elapsed / 1e9, stopped_by)


@dataclass(frozen=True)
class Throughput:
    """Samples per second of back-to-back calls, with its interval over blocks."""

    sps: float
    interval: Interval
    calls: int
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {"sps": self.sps, "ci": self.interval.to_dict(), "calls": self.calls, "seconds": self.seconds}


def measure_throughput(call: Callable[[], Any], batch: int, config: ThroughputConfig) -> Throughput:
    """Samples per second of one synchronous caller at `batch`, in blocks; stops when the interval
    is within `target_pct` or after `seconds`. The caller has made the first, allocating call; the one
    call that sizes a block is the second, untimed for the figure (at a large batch each call is most
    of the budget: resemblyzer's batch 128 takes half a second on a 2-core Xeon)."""
    per_block = calls_per_block(call, config.block_seconds, probe_calls=1)
    block_sps: list[float] = []
    with no_gc():
        calls, start = 0, clock()
        while True:
            t0 = clock()
            for _ in range(per_block):
                call()
            block_sps.append(batch * per_block / ((clock() - t0) / 1e9))
            calls += per_block
            elapsed = clock() - start
            pooled = batch * calls / (elapsed / 1e9)
            interval = median_interval(block_sps, pooled)
            if len(block_sps) >= config.min_blocks and interval.half_width_pct <= config.target_pct:
                break
            if elapsed >= config.seconds * 1e9:
                break
    return Throughput(pooled, interval, calls, elapsed / 1e9)


def measure_concurrent(queue: AsyncQueue, batch: int, seconds: float) -> float:
    """Samples per second with `queue.requests` requests kept in flight for at least `seconds`."""
    warm_up(queue.submit, WarmupConfig(iters=2 * queue.requests, seconds=0.1 * seconds))
    queue.wait_all()
    with no_gc():
        n, start = 0, clock()
        while clock() - start < seconds * 1e9:
            queue.submit()  # blocks while every request is busy
            n += 1
        queue.wait_all()
    return batch * n / ((clock() - start) / 1e9)


def harness_limit_rps(requests: int, seconds: float = 0.05) -> float:
    """Requests per second the thread-per-request queue reaches with calls that do nothing: a
    concurrent figure near this measures the harness, not the runtime. A flag's threshold, not a
    figure: 0.05 s holds thousands of no-op calls (about 90,000 a second on a 2-core Xeon)."""
    return measure_concurrent(ThreadQueue([lambda: None] * requests), 1, seconds)


def latency_uncertainty(latency: LatencyResult, bench: BenchConfig) -> dict[str, Any]:
    """The p50's interval, whether it is noisy (wider than the target when the time cap came), and
    whether the p99 rests on too few calls."""
    interval = latency.p50_interval
    known = math.isfinite(interval.half_width_pct)  # fewer than 5 blocks by the time cap: no interval
    return {
        "p50_ci_ms": {"low": interval.low, "high": interval.high, "blocks": interval.blocks} if known else None,
        "p50_ci_pct": interval.half_width_pct if known else None,
        "noisy": not known or interval.half_width_pct > bench.latency.target_pct,
        "p99_low_confidence": latency.stats.p99_low_confidence,
    }
