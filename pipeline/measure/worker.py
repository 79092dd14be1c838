"""The benchmark itself, run in a fresh process per variant (see pipeline.core.isolate).

Order matters: import the runtime, load (load_ms), first call (first_infer_ms), warm-up, batch-1
latency (timed in blocks until its p50's interval is tight enough, pipeline.measure.harness), the
throughput sweep, concurrent throughput, the dimension sweep, then accuracy and fidelity on the
scoring rows the decision needs, at the variant's peak-throughput batch. A variant out of contention
(pipeline.measure.budget) stops its latency loop there and skips the three sweeps.

Memory per phase (pipeline.core.memory.RssSampler: the kernel's high-water mark, reset per phase):
`peak_rss_mb` covers the load and batch-1 latency, `footprint_mb` is that minus the process before
loading (the runtime's own memory), `rss_mb_by_batch` each batch of the sweep; the accuracy pass is
never counted. CPU time, ours and other processes', is summed over the timed intervals only.
"""

from __future__ import annotations

import importlib
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from pipeline.core import layout
from pipeline.core.config import PARAMS_FILE, BenchConfig, ModelConfig, Params, ThroughputConfig, load_params
from pipeline.core.data import Arrays, DataSet, generate_inputs, run_batched, sample_batch
from pipeline.core.evaluate import accuracy_block, fidelity_block
from pipeline.core.memory import RssSampler
from pipeline.core.records import Accuracy, Measured, Stability, Throughput
from pipeline.core.records import LatencyStats as LatencyFigures
from pipeline.core.records import build as build_record
from pipeline.core.records import source as source_record
from pipeline.core.records.source import SourceRecord
from pipeline.core.registry import RUNTIMES
from pipeline.measure.budget import ContentionScreen, contention_screen, eval_batch, eval_rows
from pipeline.measure.energy import EnergyMeter
from pipeline.measure.gpu import GpuMeter
from pipeline.measure.harness import (
    LatencyResult,
    harness_limit_rps,
    measure_concurrent,
    measure_latency,
    measure_throughput,
    warm_up,
)
from pipeline.measure.profile import op_profile
from pipeline.measure.stats import Interval as SampleInterval
from pipeline.measure.stats import LatencyStats
from pipeline.runtimes.base import Session
from pipeline.runtimes.layout import in_layout


def other_load(before: Any, after: Any, own_cpu_s: float, wall_s: float) -> dict[str, float]:
    """CPU time that other processes (and the hypervisor, as steal) took while we were timing.

    Measured, not guessed: on a 2-core box a second busy process can triple a latency, so the
    report flags runs where this is high.
    """

    def busy(t: Any) -> float:
        return (
            sum(t)
            - t.idle
            - getattr(t, "iowait", 0.0)
            - getattr(t, "steal", 0.0)
            - getattr(t, "guest", 0.0)
            - getattr(t, "guest_nice", 0.0)
        )

    others = max(0.0, busy(after) - busy(before) - own_cpu_s)
    steal = getattr(after, "steal", 0.0) - getattr(before, "steal", 0.0)
    return {"other_cpu_pct": 100.0 * others / wall_s, "steal_pct": 100.0 * steal / wall_s}


@dataclass
class Loaded:
    """A variant loaded by its runtime, with what it took to get there."""

    session: Session
    reference: DataSet
    params: Params
    import_ms: float
    runtime_rss_mb: float
    load_ms: float
    target: str = "cpu"


def load_variant(model: str, artifact: Path, root: Path, sampler: RssSampler | None = None) -> Loaded:
    """Load the variant built in folder `artifact` (pipeline.core.layout.built_dir) for `model`."""
    params = load_params(root / PARAMS_FILE)
    threads = params.bench.resolved_threads()
    build = build_record.load(artifact)
    target = build.target
    reference = DataSet.load(layout.source_dir(model, root) / layout.REFERENCE)

    start = time.perf_counter()
    adapter = importlib.import_module(RUNTIMES[build.runtime].module)
    import_ms = 1000 * (time.perf_counter() - start)
    runtime_rss_mb = psutil.Process().memory_info().rss / 1e6

    start = time.perf_counter()
    with sampler.phase("load") if sampler else nullcontext():
        session = in_layout(adapter.load(artifact / build.entry, threads, build.runtime_config, target),
                            build.runtime_config)  # fmt: skip
    load_ms = 1000 * (time.perf_counter() - start)
    return Loaded(session, reference, params, import_ms, runtime_rss_mb, load_ms, target)


def measure_latency_only(model: str, artifact: str, root: str = ".") -> dict[str, Any]:
    """Batch-1 latency alone, the way `measure` takes it: for benchmark scripts comparing variants."""
    loaded = load_variant(model, Path(artifact), Path(root))
    call = loaded.session.prepare(sample_batch(loaded.reference.inputs, 1))
    warm_up(call, loaded.params.bench.warmup)
    latency = measure_latency(call, loaded.params.bench.latency)
    return {
        "load_ms": loaded.load_ms,
        "latency_ms": latency.stats.to_dict(),
        **latency_uncertainty(latency, loaded.params.bench),
        "runtime": loaded.session.details(),
    }


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


class PhaseTimes(dict):
    """Wall-clock seconds of each phase of the benchmark (details.phase_s): where a slow stage spends."""

    @contextmanager
    def timed(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self[name] = round(self.get(name, 0.0) + time.perf_counter() - start, 3)


class CpuClock:
    """This process's CPU time over wall time, and other processes' (and the hypervisor's steal),
    each summed over the intervals it was running only: a figure about the timed calls, not about
    whatever ran between them."""

    def __init__(self) -> None:
        self.cpu_s = self.wall_s = self.others_s = self.steal_s = 0.0

    @contextmanager
    def running(self) -> Iterator[None]:
        process = psutil.Process()
        before, wall, system = process.cpu_times(), time.perf_counter(), psutil.cpu_times()
        try:
            yield
        finally:
            after, system_after = process.cpu_times(), psutil.cpu_times()
            wall_s = time.perf_counter() - wall
            own_s = (after.user - before.user) + (after.system - before.system)
            load = other_load(system, system_after, own_s, wall_s)
            self.cpu_s += own_s
            self.wall_s += wall_s
            self.others_s += load["other_cpu_pct"] * wall_s / 100.0
            self.steal_s += load["steal_pct"] * wall_s / 100.0

    def other_load(self) -> dict[str, float]:
        wall = self.wall_s or 1.0
        return {"other_cpu_pct": 100.0 * self.others_s / wall, "steal_pct": 100.0 * self.steal_s / wall}

    @property
    def util_pct(self) -> float:
        return 100.0 * self.cpu_s / self.wall_s if self.wall_s else 0.0


def measure(model: str, artifact: str, root: str = ".") -> dict[str, Any]:
    """Load and benchmark the variant in folder `artifact` (the bench stage runs this in a fresh process)."""
    with RssSampler() as sampler:
        baseline_mb = sampler.now_mb()
        loaded = load_variant(model, Path(artifact), Path(root), sampler)
        load_rss_mb = sampler.now_mb()
        source = source_record.load(model, Path(root))
        config = loaded.params.model(model)
        screen = contention_screen(loaded.params, model, Path(artifact).name, Path(root))
        return measure_loaded(loaded, config, source, sampler, baseline_mb, load_rss_mb, screen)


def measure_loaded(
    loaded: Loaded,
    config: ModelConfig,
    source: SourceRecord,
    sampler: RssSampler,
    baseline_mb: float,
    load_rss_mb: float,
    screen: ContentionScreen | None = None,
) -> dict[str, Any]:
    """Everything after the load: latency (with the footprint), the throughput sweep, concurrent
    throughput, the dimension sweep, then accuracy and fidelity (never in a memory or CPU figure).
    `screen` (none: nothing to compare with) may find the variant out of contention: its latency loop
    stops there and the three sweeps are skipped."""
    session, reference, bench = loaded.session, loaded.reference, loaded.params.bench
    screen = screen or ContentionScreen()
    fixed, max_batch = source.fixed_batch, source.batching.max_batch
    one = sample_batch(reference.inputs, fixed or 1)  # "batch 1" is the fixed batch for fixed-batch models

    latency_cpu, sweep_cpu, phases = CpuClock(), CpuClock(), PhaseTimes()
    with sampler.phase("latency"), phases.timed("latency"):
        call = session.prepare(one)
        start = time.perf_counter()
        call()
        first_infer_ms = 1000 * (time.perf_counter() - start)
        warm_up(call, bench.warmup)
        with latency_cpu.running():
            meter = GpuMeter(loaded.target) if loaded.target.startswith("cuda") else EnergyMeter()
            meter.start()
            latency = measure_latency(call, bench.latency, screen.stop)
            energy = meter.stop(latency.stats.n)
    verdict = screen.judge(latency.p50_interval)
    sizes = [fixed] if fixed else [b for b in bench.throughput.batches if b <= (max_batch or b)]
    sweeps: dict[str, Any] = {}
    if verdict.budget == "full":
        sweeps = measure_sweeps(loaded, config, source, one, sizes or [1], sampler, phases, sweep_cpu)
    peak = sweeps["throughput_sps"].peak_batch if sweeps else None
    labelled = reference.labels is not None and config.metric != "none"
    rows = eval_rows(len(reference), labelled, bench.unlabelled_rows, short=verdict.budget == "short")
    scored = reference.head(rows.used)
    batch = eval_batch(peak, bench, max_batch, fixed)
    with phases.timed("accuracy"):
        outputs = run_batched(session.run, scored.inputs, batch, fixed is not None)
        accuracy = accuracy_block(config.metric, scored.labels, scored.outputs, outputs)
        fidelity = fidelity_block(scored.outputs, outputs, config.class_scores, config.embedding)
    with phases.timed("profile"):
        calls = bench.profile_calls if verdict.budget == "full" else bench.profile_calls_short
        profile = op_profile(session, one, calls)  # after every timed figure, on its own instance

    start = time.perf_counter()
    cached = session.load_from_cache()
    cached_load_ms = 1000 * (time.perf_counter() - start) if cached else None
    runtime_details = session.details()
    peak_rss = max(sampler.peaks["load"], sampler.peaks["latency"])
    measured = Measured(
        load_ms=loaded.load_ms,
        **({"load_cached_ms": cached_load_ms} if cached_load_ms is not None else {}),
        first_infer_ms=first_infer_ms,
        latency_ms=latency_figures(latency.stats),
        **latency_uncertainty(latency, bench),
        screen=verdict,
        **sweeps,
        peak_rss_mb=peak_rss,
        footprint_mb=peak_rss - baseline_mb,
        load_rss_mb=load_rss_mb,
        cpu_util_pct={"latency": latency_cpu.util_pct} | ({"sweep": sweep_cpu.util_pct} if sweeps else {}),
        energy=energy,
        **(meter.figures() if isinstance(meter, GpuMeter) else {}),
        dims=source.dims,
        fixed_batch=fixed,
        accuracy=Accuracy(**accuracy, eval_samples=rows.used, eval_origin=reference.origin),
        fidelity=fidelity,
        fidelity_batch=batch,
        eval_rows=rows,
        **(
            {"inference_precision": runtime_details["inference_precision"]}
            if "inference_precision" in runtime_details
            else {}
        ),
        import_ms=loaded.import_ms,
        runtime_rss_mb=loaded.runtime_rss_mb,
        phase_s={"import": loaded.import_ms / 1000, "load": loaded.load_ms / 1000, **phases},
        baseline_rss_mb=baseline_mb,
        memory_how=sampler.how,
        latency_min_ms=latency.stats.min,
        latency_max_ms=latency.stats.max,
        stability=Stability(
            blocks=latency.blocks,
            calls=latency.stats.n,
            seconds=latency.seconds,
            stopped_by=latency.stopped_by,
            **latency_cpu.other_load(),
        ),
        runtime_settings=runtime_details,
        batching=source.batching.model_dump(exclude_none=True)
        | {"eval_batch": batch, "sweep": [f"b{b}" for b in sizes] if sweeps else []},
    )
    return {"measured": measured.model_dump(mode="json", exclude_unset=True), "profile": profile}


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


def latency_figures(stats: LatencyStats) -> LatencyFigures:
    """The recorded percentiles of a timed loop (min and max go beside them, as latency_min/max_ms)."""
    return LatencyFigures(**{k: v for k, v in stats.to_dict().items() if k not in ("min", "max")})


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
            stats = measured.stats.to_dict()
            result[dim][str(value)] = {k: stats[k] for k in ("p50", "p90", "p99", "n")} | {
                "p50_ci_pct": latency_uncertainty(measured, bench)["p50_ci_pct"]
            }
    return result
