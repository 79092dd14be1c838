"""The three sweeps a variant in contention gets after its batch-1 latency: samples/s of one caller at
each batch size, concurrent batch-1 requests, and latency at each value of the dim_sweep dimensions."""

from __future__ import annotations

import time
from typing import Any

from pipeline.core.config import BenchConfig, ModelConfig, ThroughputConfig
from pipeline.core.data import Arrays, DataSet, generate_inputs, sample_batch
from pipeline.core.memory import RssSampler
from pipeline.core.records import Throughput
from pipeline.core.records.source import SourceRecord
from pipeline.core.stats import Interval as SampleInterval
from pipeline.measure.clock import CpuClock, PhaseTimes
from pipeline.measure.harness import (
    harness_limit_rps,
    latency_uncertainty,
    measure_concurrent,
    measure_latency,
    measure_throughput,
    warm_up,
)
from pipeline.measure.loading import Loaded
from pipeline.runtimes.base import Session


def measure_sweeps(
    loaded: Loaded,
    config: ModelConfig,
    source: SourceRecord,
    one: Arrays,
    sizes: list[int],
    sampler: RssSampler,
    phases: PhaseTimes,
    cpu: CpuClock,
) -> dict[str, Any]:
    """The figures of a full budget, as Measured's fields: the throughput sweep at `sizes` and the
    concurrent figure (their CPU on `cpu`), then the dimension sweep. A variant out of contention gets none."""
    session, bench = loaded.session, loaded.params.bench
    with cpu.running():
        with phases.timed("sweep"):
            sweep = throughput_sweep(session, loaded.reference, sizes, bench.throughput, sampler)
        with phases.timed("concurrent"):
            concurrent = concurrent_throughput(session, one, source.fixed_batch or 1, bench)
    with phases.timed("dim_sweep"):
        by_dim = latency_by_dim(session, config, source, bench)
    by_batch = sweep["by_batch"]
    peak_key = max(by_batch, key=by_batch.__getitem__)
    throughput = Throughput(
        peak=by_batch[peak_key], peak_batch=int(peak_key[1:]), by_batch=by_batch, stopped_by=sweep["stopped_by"]
    )
    return {
        "throughput_sps": throughput,
        "throughput_concurrent": concurrent,
        "rss_mb_by_batch": sweep["rss_mb_by_batch"],
        **({"latency_ms_by_dim": by_dim} if by_dim else {}),
        "sweep_load": cpu.other_load(),
        "throughput_ci": sweep["ci"],
    }


def throughput_sweep(
    session: Session, reference: DataSet, sizes: list[int], config: ThroughputConfig, sampler: RssSampler
) -> dict[str, Any]:
    """Samples per second of one synchronous caller at each batch size, the same loop for every
    runtime, with the peak RSS at each. It stops at a batch whose gain over the previous one is
    confirmed below `min_gain_pct` (the top of the gain's interval), or when one call takes longer
    than `max_call_s`; an unconfirmed small gain goes on to the next batch. `stopped_by` says which."""
    by_batch: dict[str, float] = {}
    intervals: dict[str, SampleInterval] = {}
    rss: dict[str, float] = {}
    stopped_by = "all batch sizes measured"
    for size in sizes:
        key = f"b{size}"
        if by_batch:  # at the previous batch's samples/s; per-sample cost seldom grows with the batch
            expected_s = size / list(by_batch.values())[-1]
            if expected_s > 2 * config.max_call_s:  # far over: not worth one call to find out
                stopped_by = (
                    f"one call at batch {size} would take about {expected_s:.2f} s (at the previous batch's "
                    f"samples/s) > 2 x max_call_s {config.max_call_s:g}"
                )
                break
        with sampler.phase(key):
            call = session.prepare(sample_batch(reference.inputs, size))
            start = time.perf_counter()
            call()
            one_call_s = time.perf_counter() - start
            if by_batch and one_call_s > config.max_call_s:
                stopped_by = f"one call at batch {size} took {one_call_s:.2f} s > max_call_s {config.max_call_s:g}"
                break
            measured = measure_throughput(call, size, config)
        by_batch[key], intervals[key], rss[key] = measured.sps, measured.interval, sampler.peaks[key]
        if len(intervals) > 1:
            previous = list(intervals.values())[-2]
            gain_high = 100 * (measured.interval.high / max(previous.low, 1e-12) - 1)
            if gain_high < config.min_gain_pct:
                gain = 100 * (measured.sps / previous.center - 1)
                stopped_by = (
                    f"batch {size} gained {gain:+.1f}% over the previous one (at most {gain_high:+.1f}% "
                    f"at 95% confidence < {config.min_gain_pct:g}%)"
                )
                break
    ci = {k: v.to_dict() for k, v in intervals.items()}
    return {"by_batch": by_batch, "rss_mb_by_batch": rss, "stopped_by": stopped_by, "ci": ci}


def concurrent_throughput(session: Session, one: Arrays, batch: int, bench: BenchConfig) -> dict[str, Any]:
    """Samples per second with several batch-1 requests in flight: a server's view, beside the
    single-caller sweep. Every runtime gets the same threads in all, split per request where it can
    (how is recorded); a figure near the harness's own limit (no-op calls) is flagged."""
    threads = bench.resolved_threads()
    queue = session.async_queue(one, bench.throughput.concurrent_requests or threads, threads)
    value = measure_concurrent(queue, batch, bench.throughput.concurrent_seconds)
    limit = harness_limit_rps(queue.requests) * batch
    return {
        "sps": value,
        "batch": batch,
        "total_threads": threads,
        "harness_limit_sps": limit,
        "harness_bound": value >= 0.5 * limit,
        **queue.details(),
    }


def latency_by_dim(session: Session, config: ModelConfig, source: SourceRecord, bench: Any) -> dict[str, Any]:
    """Batch-1 latency at each value of `dim_sweep`'s dimensions (timed as the batch-1 figure), on
    inputs generated at that size; the other dimensions keep their values. Keys are the values
    (a dict: DVC drops lists)."""
    result: dict[str, Any] = {}
    for dim, values in config.dim_sweep.items():
        result[dim] = {}
        for value in values:
            dims = source.dims | {dim: value}
            inputs = generate_inputs(config.inputs, source.fixed_batch or 1, 0, dims, source.vocab_size)
            call = session.prepare(inputs)
            warm_up(call, bench.warmup)
            measured = measure_latency(call, bench.latency)
            stats = measured.stats.model_dump()
            result[dim][str(value)] = {k: stats[k] for k in ("p50", "p90", "p99", "n")} | {
                "p50_ci_pct": latency_uncertainty(measured, bench)["p50_ci_pct"]
            }
    return result
