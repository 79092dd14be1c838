"""Timing loops and statistics, on synthetic calls (no sleeps, no timing assertions)."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.core import stats
from pipeline.core.config import LatencyConfig, ThroughputConfig, WarmupConfig
from pipeline.core.records import LatencyStats
from pipeline.core.stats import spread_pct
from pipeline.measure import harness


def test_latency_stats_from_ns():
    stats = LatencyStats.from_ns(np.array([1_000_000, 2_000_000, 3_000_000, 4_000_000]))
    assert stats.p50 == pytest.approx(2.5) and stats.mean == pytest.approx(2.5)
    assert stats.min == 1.0 and stats.max == 4.0 and stats.n == 4
    assert set(stats.model_dump()) == {"p50", "p90", "p99", "mean", "std", "min", "max", "n"}


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


def test_latency_stops_once_the_p50_interval_is_tight(monkeypatch):
    """A steady 1 ms call: the interval is ±0% after min_blocks blocks, so the loop stops there,
    long before the time cap (sequential stopping: a fast model costs well under a second)."""
    clock = FakeClock(iter(lambda: 1_000_000, None))
    monkeypatch.setattr(harness, "clock", clock)
    config = LatencyConfig(min_blocks=6, min_seconds=0.03, max_seconds=10, block_seconds=0.01)
    result = harness.measure_latency(clock.call, config)
    assert result.blocks == 6 and result.stats.n == 60 and result.stats.p50 == pytest.approx(1.0)
    assert result.p50_interval.half_width_pct == pytest.approx(0.0) and "within" in result.stopped_by
    assert result.seconds < 0.1


def test_latency_gives_up_at_the_cap_with_a_wide_interval(monkeypatch):
    """Blocks alternate between 1 ms and 3 ms calls (a machine switching state): the interval stays
    wide, the loop stops at max_seconds and says so."""
    pattern = [1_000_000] * 10 + [3_000_000] * 10
    clock = FakeClock(x for _ in range(100_000) for x in pattern)
    monkeypatch.setattr(harness, "clock", clock)
    config = LatencyConfig(min_blocks=6, min_seconds=0.02, max_seconds=0.5, block_seconds=0.01, target_pct=2)
    result = harness.measure_latency(clock.call, config)
    assert result.p50_interval.half_width_pct > 2
    assert result.seconds >= 0.5 and "time cap" in result.stopped_by


def test_the_early_stop_judges_the_p50_interval_in_ms(monkeypatch):
    """The out-of-contention check sees what the records hold (ms), not the loop's nanoseconds: a
    1 ms call against a best known 0.9 ms at 3x is within reach and runs to its target; against
    0.1 ms it stops at min_blocks (a bug once stopped every variant that had a rival)."""
    from pipeline.measure.budget import ContentionScreen, Rival

    pattern = [1_000_000] * 10 + [1_300_000] * 10  # an interval too wide to stop on: the cap decides
    config = LatencyConfig(min_blocks=6, min_seconds=0.02, max_seconds=0.5, block_seconds=0.01, target_pct=2)
    stopped = {}
    for best_ms in (0.9, 0.1):
        clock = FakeClock(x for _ in range(100_000) for x in pattern)
        monkeypatch.setattr(harness, "clock", clock)
        rival = Rival("onnx_opt", best_ms, best_ms * 0.98, best_ms * 1.02)
        stopped[best_ms] = harness.measure_latency(clock.call, config, ContentionScreen(rival, 3).stop).stopped_by
    assert "time cap" in stopped[0.9] and "out of contention" in stopped[0.1]


def test_the_interval_comes_from_block_medians_not_from_the_call_count():
    """Millions of correlated calls do not make a drifting figure precise: five blocks give no
    interval, and blocks that disagree give a wide one however many calls each holds."""
    assert stats.median_interval([1.0] * 5, 1.0).half_width_pct == float("inf")
    steady = stats.median_interval([1.0, 1.005, 0.995, 1.0, 1.0, 1.005, 1.0, 0.995, 1.0, 1.0], 1.0)
    drifting = stats.median_interval([1.0, 1.5, 1.0, 1.5, 1.0, 1.5], 1.25)
    assert steady.half_width_pct < 1 < 10 < drifting.half_width_pct
    ratio = stats.ratio_interval([1.2, 1.21, 1.19, 1.2, 1.2, 1.2])
    assert ratio.low > 1.15 and ratio.high < 1.25


def test_blocks_caught_in_a_speed_flip_do_not_hide_a_real_difference():
    """This machine flips between two speed states; a round that straddles a flip reads 2x or 0.5x.
    With one round in six so caught, a 5% difference stays separated (the median's interval), where
    a t interval of the mean log ratio reached across 1."""
    rng = np.random.default_rng(0)
    ratios = 1.05 * np.exp(rng.normal(0, 0.01, 300))
    ratios[::6] *= rng.choice([0.5, 2.0], size=len(ratios[::6]))
    robust = stats.ratio_interval(ratios)
    assert 1.03 < robust.low <= robust.center <= robust.high < 1.07
    logs = np.log(ratios)
    t_half = 1.97 * logs.std(ddof=1) / np.sqrt(len(logs))
    assert np.exp(logs.mean() - t_half) < 1.03  # what the old interval said: not separated beyond 3%


def test_a_ratio_that_moves_during_the_contest_is_not_called_separated():
    """Rounds inside one machine state agree, so their interval alone is narrow; a ratio that reads
    1.00 for half the contest and 1.07 for the other half is not a 3% difference anyone can count on."""
    rng = np.random.default_rng(1)
    steady = 1.05 * np.exp(rng.normal(0, 0.005, 400))
    moving = np.concatenate([np.full(200, 1.0), np.full(200, 1.07)]) * np.exp(rng.normal(0, 0.005, 400))
    assert stats.paired_ratio_interval(steady).low > 1.03
    assert stats.ratio_interval(moving).high - stats.ratio_interval(moving).low < 0.08
    widened = stats.paired_ratio_interval(moving)
    assert widened.low < 1.03 and widened.high > 1.05


def test_p99_is_low_confidence_below_1000_calls():
    assert LatencyStats.from_ns(np.ones(999)).p99_low_confidence
    assert not LatencyStats.from_ns(np.ones(1000)).p99_low_confidence


def test_timed_blocks_run_with_the_garbage_collector_off(monkeypatch):
    import gc

    states = []
    clock = FakeClock(iter(lambda: 1_000_000, None))
    monkeypatch.setattr(harness, "clock", clock)

    def call() -> None:
        states.append(gc.isenabled())
        clock.call()

    harness.measure_latency(call, LatencyConfig(min_blocks=6, min_seconds=0.0, max_seconds=1, block_seconds=0.005))
    assert gc.isenabled() and not any(states[3:])  # the 3 probe calls sizing the blocks run outside


def test_warm_up_meets_both_minimums(monkeypatch):
    clock = FakeClock(iter(lambda: 1_000_000, None))
    monkeypatch.setattr(harness, "clock", clock)
    assert harness.warm_up(clock.call, WarmupConfig(iters=5, seconds=0.02)) == 20
    assert harness.warm_up(clock.call, WarmupConfig(iters=50, seconds=0.001)) == 50


def test_throughput_counts_samples_per_second(monkeypatch):
    clock = FakeClock(iter(lambda: 2_000_000, None))  # 2 ms per batch of 8 -> 4000 samples/s
    monkeypatch.setattr(harness, "clock", clock)
    measured = harness.measure_throughput(clock.call, 8, ThroughputConfig(seconds=1, min_blocks=6, block_seconds=0.01))
    assert measured.sps == pytest.approx(4000) and measured.interval.half_width_pct == pytest.approx(0)
    assert measured.seconds < 0.1  # steady: done after min_blocks, not at the cap
