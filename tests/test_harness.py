"""Timing loops and statistics, on synthetic calls (no sleeps, no timing assertions)."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.core.config import LatencyConfig, WarmupConfig
from pipeline.measure import harness
from pipeline.measure.stats import LatencyStats, spread_pct


def test_latency_stats_from_ns():
    stats = LatencyStats.from_ns(np.array([1_000_000, 2_000_000, 3_000_000, 4_000_000]))
    assert stats.p50 == pytest.approx(2.5) and stats.mean == pytest.approx(2.5)
    assert stats.min == 1.0 and stats.max == 4.0 and stats.n == 4
    assert set(stats.to_dict()) == {"p50", "p90", "p99", "mean", "std", "min", "max", "n"}


def test_spread():
    assert spread_pct([10.0, 11.0, 10.5]) == pytest.approx(10.0)
    assert spread_pct([5.0]) == 0.0


class FakeClock:
    """A clock that advances by a scripted call duration each time the fake model runs."""

    def __init__(self, durations_ns):
        self.now, self.durations = 0, iter(durations_ns)

    def __call__(self) -> int:
        return self.now

    def call(self) -> None:
        self.now += next(self.durations)


def test_latency_stops_when_windows_agree(monkeypatch):
    clock = FakeClock(iter(lambda: 1_000_000, None))  # every call takes 1 ms
    monkeypatch.setattr(harness, "clock", clock)
    config = LatencyConfig(min_iters=10, min_seconds=0.03, max_seconds=1, window_seconds=0.01, stable_windows=3)
    result = harness.measure_latency(clock.call, config)
    assert result.noise_pct == 0 and result.windows == 3
    assert result.stats.n == 30 and result.stats.p50 == pytest.approx(1.0)


def test_latency_gives_up_at_max_seconds_and_flags_noise(monkeypatch):
    pattern = [1_000_000] * 10 + [3_000_000] * 4  # alternating fast and slow windows, forever
    clock = FakeClock(x for _ in range(10_000) for x in pattern)
    monkeypatch.setattr(harness, "clock", clock)
    config = LatencyConfig(
        min_iters=10, min_seconds=0.02, max_seconds=0.2, window_seconds=0.01, stable_windows=3, stability_pct=10
    )
    result = harness.measure_latency(clock.call, config)
    assert result.noise_pct > 10
    assert result.seconds >= 0.2


def test_segments_combine_and_expose_a_slow_spell(monkeypatch):
    """Each segment alone looks stable; their p50s show the machine moved by 50% between them."""
    config = LatencyConfig(min_iters=10, min_seconds=0.03, max_seconds=1, window_seconds=0.01, stable_windows=3)
    fast = FakeClock(iter(lambda: 1_000_000, None))
    monkeypatch.setattr(harness, "clock", fast)
    first = harness.measure_latency(fast.call, config)
    slow = FakeClock(iter(lambda: 1_500_000, None))
    monkeypatch.setattr(harness, "clock", slow)
    second = harness.measure_latency(slow.call, config)
    assert first.noise_pct == 0 and second.noise_pct == 0
    both = harness.LatencyResult.combine([first, second])
    assert both.noise_pct == pytest.approx(50.0) and both.windows == first.windows + second.windows
    assert both.segment_medians_ns == (1_000_000, 1_500_000)
    assert both.stats.n == first.stats.n + second.stats.n


def test_warm_up_meets_both_minimums(monkeypatch):
    clock = FakeClock(iter(lambda: 1_000_000, None))
    monkeypatch.setattr(harness, "clock", clock)
    assert harness.warm_up(clock.call, WarmupConfig(iters=5, seconds=0.02)) == 20
    assert harness.warm_up(clock.call, WarmupConfig(iters=50, seconds=0.001)) == 50


def test_throughput_counts_samples_per_second(monkeypatch):
    clock = FakeClock(iter(lambda: 2_000_000, None))  # 2 ms per batch of 8 -> 4000 samples/s
    monkeypatch.setattr(harness, "clock", clock)
    assert harness.measure_throughput(clock.call, batch=8, seconds=0.1) == pytest.approx(4000)
