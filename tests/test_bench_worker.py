"""The benchmark worker on a runtime stand-in whose memory and speed are known: every figure
must measure what its name says."""

from __future__ import annotations

import time

import numpy as np
import pytest

from pipeline.core.config import BenchConfig, ModelConfig, Params
from pipeline.core.data import Arrays, DataSet
from pipeline.core.memory import RssSampler
from pipeline.core.records.source import SourceRecord
from pipeline.core.stats import Interval
from pipeline.measure import harness, sweeps
from pipeline.measure.budget import ContentionScreen, Rival
from pipeline.measure.harness import measure_concurrent
from pipeline.measure.loading import Loaded
from pipeline.measure.worker import measure_loaded
from pipeline.runtimes.base import OpTime, Session, ThreadQueue

LOAD_MB = 300  # what the stand-in's weights take once loaded
CALL_S = 0.002  # what one call takes, whatever the batch: throughput grows with the batch


class StandIn(Session):
    """Holds LOAD_MB of weights; a call sleeps CALL_S (releasing the GIL, as runtimes do)."""

    def __init__(self, call_s: float = CALL_S, per_sample_s: float = 0.0) -> None:
        self.input_names, self.output_names = ["x"], ["y"]
        self.weights = np.ones(LOAD_MB * 250_000, dtype=np.float32)  # 4 bytes each: touched, resident
        self.call_s, self.per_sample_s = call_s, per_sample_s

    def run(self, inputs: Arrays) -> Arrays:
        time.sleep(self.call_s + self.per_sample_s * len(inputs["x"]))
        return {"y": inputs["x"] * 2}


class Busy(StandIn):
    """Spins instead of sleeping: exact per-sample cost (a sleep's own overhead is ~10 ms on some VMs)."""

    def run(self, inputs: Arrays) -> Arrays:
        end = time.perf_counter() + self.call_s + self.per_sample_s * len(inputs["x"])
        while time.perf_counter() < end:
            pass
        return {"y": inputs["x"] * 2}


BENCH = BenchConfig.model_validate(
    {
        "threads": 1,
        "warmup": {"iters": 2, "seconds": 0.0},
        "latency": {"min_blocks": 6, "min_seconds": 0.05, "max_seconds": 0.2, "block_seconds": 0.01},
        "throughput": {"batches": [1, 8, 32, 128], "seconds": 0.05},
    }
)


def run(
    session_factory,
    bench: BenchConfig = BENCH,
    screen: ContentionScreen | None = None,
    rows: int = 64,
    labels: bool = False,
    batch: int | str = "batch",
) -> dict:
    x = np.arange(rows, dtype=np.float32).reshape(rows, 1)
    reference = DataSet({"x": x}, {"y": x * 2}, labels=(x[:, 0] % 2).astype(np.int64) if labels else None)
    spec = {"source": "onnx", "file": "m.onnx", "inputs": {"x": {"shape": [batch, 1]}}}
    spec |= {"metric": "binary_accuracy"} if labels else {}
    config = ModelConfig.model_validate(spec)
    params = Params.model_validate(
        {"models": ["m"], "catalog": {"m": spec}, "variants": {"onnx_fp32": {}}, "bench": bench}
    )
    with RssSampler() as sampler:
        baseline = sampler.now_mb()
        with sampler.phase("load"):
            session = session_factory()
        loaded = Loaded(session, reference, params, 0.0, baseline, 1.0)
        source = SourceRecord(
            model="m", status="ok", export={"status": "ok"}, fixed_batch=batch if isinstance(batch, int) else None
        )
        result = measure_loaded(loaded, config, source, sampler, baseline, sampler.now_mb(), screen)
    return result["measured"] | {"baseline": baseline, "profile": result["profile"]}


def test_peak_rss_is_the_runtimes_own_footprint_within_ten_percent():
    metrics = run(StandIn)
    assert metrics["peak_rss_mb"] - metrics["baseline"] == pytest.approx(LOAD_MB, rel=0.10)
    assert metrics["load_rss_mb"] - metrics["baseline"] == pytest.approx(LOAD_MB, rel=0.10)
    assert set(metrics["rss_mb_by_batch"]) == set(metrics["throughput_sps"]["by_batch"])


def test_accuracy_pass_never_counts_in_peak_rss():
    class HungryForEval(StandIn):
        def run(self, inputs: Arrays) -> Arrays:
            if len(inputs["x"]) > 32:  # only the accuracy pass (64 rows at once) asks for this much
                self.spike = np.ones(200 * 250_000, dtype=np.float32)
            return super().run(inputs)

    bench = BENCH.model_copy(update={"throughput": BENCH.throughput.model_copy(update={"batches": [1, 8]})})
    metrics = run(HungryForEval, bench)
    assert metrics["peak_rss_mb"] - metrics["baseline"] < LOAD_MB * 1.1


def test_sweep_stops_when_a_bigger_batch_is_confirmed_to_gain_nothing(monkeypatch):
    """The rule, not the clock: each batch measures 500 samples/s within ±2% (a busy CI box once widened
    b1's real interval enough that b8's gain could not be ruled out, and the sweep rightly went on)."""

    def flat(call, batch, config):
        call()
        return harness.Throughput(500.0, Interval(500.0, 490.0, 510.0, 8), 8, 0.1)

    monkeypatch.setattr(sweeps, "measure_throughput", flat)
    bench = BENCH.model_copy(update={"throughput": BENCH.throughput.model_copy(update={"min_gain_pct": 20})})
    metrics = run(lambda: Busy(call_s=0.0, per_sample_s=0.0001), bench)
    assert list(metrics["throughput_sps"]["by_batch"]) == ["b1", "b8"]
    assert "at most +4.1% at 95% confidence < 20%" in metrics["throughput_sps"]["stopped_by"]


def test_sweep_does_not_stop_on_a_gain_it_could_not_confirm():
    """One block per batch (the cap came first): no interval, so the sweep goes on rather than stop on a
    guess, although the stand-in gains nothing from batching (the old rule stopped at b8)."""
    bench = BENCH.model_copy(update={"throughput": BENCH.throughput.model_copy(update={"seconds": 0.01})})
    metrics = run(lambda: Busy(call_s=0.0, per_sample_s=0.004), bench)  # b1 4 ms, b8 32 ms: one block each
    assert list(metrics["throughput_sps"]["by_batch"])[:3] == ["b1", "b8", "b32"]


def test_sweep_stops_before_a_call_longer_than_max_call_s():
    bench = BENCH.model_copy(
        update={"throughput": BENCH.throughput.model_copy(update={"max_call_s": 0.04, "min_gain_pct": 0})}
    )
    metrics = run(lambda: StandIn(call_s=0.004, per_sample_s=0.0008), bench)  # 10 ms of room at b32: a loaded CI
    assert list(metrics["throughput_sps"]["by_batch"]) == ["b1", "b8", "b32"]  # b32: 29.6 ms; b128: 106 > 40 ms
    # b128 is not even tried: at b32's samples/s it would take about 118 ms, over twice max_call_s
    assert "batch 128 would take about" in metrics["throughput_sps"]["stopped_by"]


def test_sweep_measures_a_call_it_cannot_rule_out_then_stops():
    bench = BENCH.model_copy(
        update={"throughput": BENCH.throughput.model_copy(update={"max_call_s": 0.06, "min_gain_pct": 0})}
    )
    # b8 20 ms; b32 68 ms, predicted about 80 (< 2 x 60): tried, then over max_call_s. Tens of milliseconds
    # of room under the cap at b8: a busy call preempted by the other test worker runs a time slice long
    # (CI's two workers stopped the sweep at b8 with 2.6 ms against a 6 ms cap, and once with 12 against 30)
    metrics = run(lambda: Busy(call_s=0.004, per_sample_s=0.002), bench)
    assert list(metrics["throughput_sps"]["by_batch"]) == ["b1", "b8"]
    assert "one call at batch 32 took" in metrics["throughput_sps"]["stopped_by"]


def test_latency_and_throughput_follow_the_stand_ins_speed():
    metrics = run(StandIn)
    assert metrics["latency_ms"]["p50"] >= CALL_S * 1000  # a sleep never returns early
    assert metrics["throughput_sps"]["by_batch"]["b1"] <= 1 / CALL_S
    assert metrics["throughput_sps"]["by_batch"]["b8"] > 4 * metrics["throughput_sps"]["by_batch"]["b1"]
    concurrent = metrics["throughput_concurrent"]
    assert concurrent["requests"] == 1 and concurrent["batch"] == 1 and concurrent["sps"] <= 1 / CALL_S
    assert set(metrics["cpu_util_pct"]) == {"latency", "sweep"}
    assert metrics["accuracy"]["metric"] == "none" and metrics["fidelity"]["y"]["cosine_min"] == pytest.approx(1.0)


def test_requests_in_flight_overlap():
    one = measure_concurrent(ThreadQueue([lambda: time.sleep(0.01)]), 1, 0.2)
    four = measure_concurrent(ThreadQueue([lambda: time.sleep(0.01) for _ in range(4)]), 1, 0.2)
    assert four > 2 * one  # 4 sleeps overlap: relative to one caller measured here, not a fixed rate


FAST_RIVAL = ContentionScreen(Rival("onnx_opt", p50=0.1, low=0.09, high=0.11), ratio=1.5)  # the stand-in: >= 2 ms


def test_a_variant_out_of_contention_stops_at_min_blocks_and_skips_the_sweeps():
    metrics = run(StandIn, screen=FAST_RIVAL)
    assert metrics["screen"]["budget"] == "short" and metrics["screen"]["best_known"] == "onnx_opt"
    assert "out of contention" in metrics["screen"]["reason"] and "1.5x" in metrics["screen"]["reason"]
    # stopped at the first check: min_blocks, or the block after them that reaches min_seconds on a loaded machine
    assert BENCH.latency.min_blocks <= metrics["stability"]["blocks"] <= BENCH.latency.min_blocks + 2
    assert metrics["stability"]["stopped_by"].startswith("out of contention")
    for skipped in ("throughput_sps", "throughput_concurrent", "rss_mb_by_batch", "throughput_ci", "sweep_load"):
        assert skipped not in metrics
    assert set(metrics["cpu_util_pct"]) == {"latency"} and "sweep" not in metrics["phase_s"]
    assert metrics["batching"]["sweep"] == [] and metrics["fidelity_batch"] == BENCH.eval_batch
    assert metrics["fidelity"]["y"]["cosine_min"] == pytest.approx(1.0)  # quality is always measured


class Profiled(StandIn):
    def op_times(self, inputs: Arrays, calls: int) -> list[OpTime]:
        return [OpTime("MatMul", self.call_s * 1000) for _ in range(calls)]


def test_a_variant_out_of_contention_is_profiled_over_fewer_calls():
    """Its operator shares decide nothing: profile_calls_short runs, and the record says how many."""
    assert run(Profiled, screen=FAST_RIVAL)["profile"]["calls"] == BENCH.profile_calls_short < BENCH.profile_calls
    assert run(Profiled)["profile"]["calls"] == BENCH.profile_calls  # nothing to compare with: the full budget


def test_a_variant_within_reach_gets_the_full_budget_and_evaluates_at_its_peak_batch():
    slow_rival = ContentionScreen(Rival("onnx_fp32", p50=100.0, low=90.0, high=110.0), ratio=1.5)
    bench = BENCH.model_copy(update={"throughput": BENCH.throughput.model_copy(update={"batches": [1, 8]})})
    metrics = run(StandIn, bench, screen=slow_rival)
    assert metrics["screen"]["budget"] == "full" and metrics["screen"]["best_known"] == "onnx_fp32"
    assert "throughput_sps" in metrics and "throughput_concurrent" in metrics
    assert metrics["fidelity_batch"] == metrics["throughput_sps"]["peak_batch"] == 8  # b8: 8x b1's samples/s


def test_unlabelled_rows_are_cut_to_the_count_that_bounds_the_worst_row():
    metrics = run(lambda: StandIn(call_s=0.0), rows=400, screen=FAST_RIVAL)
    assert metrics["eval_rows"]["used"] == metrics["accuracy"]["eval_samples"] == 299
    assert metrics["eval_rows"]["available"] == 400 and "worst of 299 rows" in metrics["eval_rows"]["rule"]


def test_labelled_rows_are_all_kept():
    metrics = run(lambda: StandIn(call_s=0.0), rows=400, labels=True, screen=FAST_RIVAL)
    assert metrics["eval_rows"]["used"] == metrics["accuracy"]["eval_samples"] == 400
    assert metrics["accuracy"]["delta"] == pytest.approx(0.0)


def test_a_fixed_batch_model_is_evaluated_at_its_batch_on_the_bounding_rows():
    metrics = run(lambda: StandIn(call_s=0.0), rows=400, batch=1)
    assert metrics["fidelity_batch"] == 1 and metrics["eval_rows"]["used"] == 299
    assert list(metrics["throughput_sps"]["by_batch"]) == ["b1"]
    assert metrics["fidelity"]["y"]["cosine_min"] == pytest.approx(1.0)
