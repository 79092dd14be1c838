"""The benchmark itself, run in a fresh process per variant (see pipeline.core.isolate).

Order matters: import the runtime, load (load_ms), first call (first_infer_ms), warm-up, a first
batch-1 latency segment, the throughput sweep and concurrent throughput, the remaining latency
segments (apart in time from the first, so one slow spell of the machine does not decide the
number), the dimension sweep, then accuracy and fidelity on the scoring rows.

Memory is sampled by a thread (pipeline.core.memory.RssSampler) per phase: `peak_rss_mb` covers the
load and the first latency segment (the runtime's own footprint at batch 1), `rss_mb_by_batch`
each batch of the sweep; the accuracy pass is never counted. CPU utilisation is per phase too.
"""

from __future__ import annotations

import importlib
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
from pipeline.core.files import read_json
from pipeline.core.memory import RssSampler, batch_size
from pipeline.core.registry import RUNTIMES
from pipeline.measure.energy import EnergyMeter
from pipeline.measure.gpu import GpuMeter
from pipeline.measure.harness import LatencyResult, measure_concurrent, measure_latency, measure_throughput, warm_up
from pipeline.measure.profile import op_profile
from pipeline.runtimes.base import Session


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
    build = read_json(artifact / layout.BUILD_INFO)
    target = build.get("target", "cpu")
    reference = DataSet.load(layout.source_dir(model, root) / layout.REFERENCE)

    start = time.perf_counter()
    adapter = importlib.import_module(RUNTIMES[build["runtime"]].module)
    import_ms = 1000 * (time.perf_counter() - start)
    runtime_rss_mb = psutil.Process().memory_info().rss / 1e6

    start = time.perf_counter()
    with sampler.phase("load") if sampler else nullcontext():
        session = adapter.load(artifact / build["entry"], threads, build["runtime_config"], target)
    load_ms = 1000 * (time.perf_counter() - start)
    return Loaded(session, reference, params, import_ms, runtime_rss_mb, load_ms, target)


def measure_latency_only(model: str, artifact: str, root: str = ".") -> dict[str, Any]:
    """Batch-1 latency alone, the way `measure` takes it: for benchmark scripts comparing variants."""
    loaded = load_variant(model, Path(artifact), Path(root))
    call = loaded.session.prepare(sample_batch(loaded.reference.inputs, 1))
    config = loaded.params.bench.latency
    warm_up(call, loaded.params.bench.warmup)
    latency = LatencyResult.combine([measure_latency(call, config) for _ in range(config.segments)])
    return {
        "load_ms": loaded.load_ms,
        "latency_ms": latency.stats.to_dict(),
        "noise_pct": latency.noise_pct,
        "stable": latency.noise_pct <= config.stability_pct,
        "runtime": loaded.session.details(),
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
    """This process's CPU time over wall time, summed over the intervals it was running."""

    def __init__(self) -> None:
        self.cpu_s = self.wall_s = 0.0
        self.system_before: Any = None
        self.system_after: Any = None

    @contextmanager
    def running(self) -> Iterator[None]:
        process = psutil.Process()
        before, wall, system = process.cpu_times(), time.perf_counter(), psutil.cpu_times()
        self.system_before = self.system_before or system
        try:
            yield
        finally:
            after = process.cpu_times()
            self.cpu_s += (after.user - before.user) + (after.system - before.system)
            self.wall_s += time.perf_counter() - wall
            self.system_after = psutil.cpu_times()

    def other_load(self) -> dict[str, float]:
        return other_load(self.system_before, self.system_after, self.cpu_s, self.wall_s)

    @property
    def util_pct(self) -> float:
        return 100.0 * self.cpu_s / self.wall_s if self.wall_s else 0.0


def measure(model: str, artifact: str, root: str = ".") -> dict[str, Any]:
    """Load and benchmark the variant in folder `artifact` (the bench stage runs this in a fresh process)."""
    with RssSampler() as sampler:
        baseline_mb = sampler.now_mb()
        loaded = load_variant(model, Path(artifact), Path(root), sampler)
        load_rss_mb = sampler.now_mb()
        source = read_json(layout.source_dir(model, Path(root)) / layout.SOURCE_INFO)
        config = loaded.params.model(model)
        return measure_loaded(loaded, config, source, sampler, baseline_mb, load_rss_mb)


def measure_loaded(
    loaded: Loaded,
    config: ModelConfig,
    source: dict[str, Any],
    sampler: RssSampler,
    baseline_mb: float,
    load_rss_mb: float,
) -> dict[str, Any]:
    """Everything after the load: latency (with the footprint sampled), the throughput sweep,
    concurrent throughput, the dimension sweep, then accuracy and fidelity (never in a memory or
    CPU figure)."""
    session, reference, bench = loaded.session, loaded.reference, loaded.params.bench
    fixed, batching = source.get("fixed_batch"), source.get("batching", {})
    one = sample_batch(reference.inputs, fixed or 1)  # "batch 1" is the fixed batch for fixed-batch models

    latency_cpu, sweep_cpu, phases = CpuClock(), CpuClock(), PhaseTimes()
    with sampler.phase("latency"), phases.timed("latency"):
        call = session.prepare(one)
        start = time.perf_counter()
        call()
        first_infer_ms = 1000 * (time.perf_counter() - start)
        with latency_cpu.running():
            warm_up(call, bench.warmup)
            meter = GpuMeter(loaded.target) if loaded.target.startswith("cuda") else EnergyMeter()
            meter.start()
            segments = [measure_latency(call, bench.latency)]
            energy = meter.stop(segments[0].stats.n)
    sizes = [fixed] if fixed else [b for b in bench.throughput.batches if b <= batching.get("max_batch", b)]
    with sweep_cpu.running():
        with phases.timed("sweep"):
            sweep = throughput_sweep(session, reference, sizes or [1], bench.throughput, sampler)
        with phases.timed("concurrent"):
            concurrent = concurrent_throughput(session, one, fixed or 1, bench)
    with sampler.phase("latency_after_sweep"), latency_cpu.running(), phases.timed("latency"):
        warm_up(call, bench.warmup)
        segments += [measure_latency(call, bench.latency) for _ in range(bench.latency.segments - 1)]
    latency = LatencyResult.combine(segments)

    with phases.timed("dim_sweep"):
        by_dim = latency_by_dim(session, config, source, bench)
    fastest = max(sweep["by_batch"], key=sweep["by_batch"].__getitem__)  # the most samples/s: the quickest pass
    eval_batch = batch_size(min(bench.eval_batch, int(fastest[1:])), batching, fixed)
    with phases.timed("accuracy"):
        outputs = run_batched(session.run, reference.inputs, eval_batch, fixed is not None)
        accuracy = accuracy_block(config.metric, reference.labels, reference.outputs, outputs)
        fidelity = fidelity_block(reference.outputs, outputs, config.class_scores)
    with phases.timed("profile"):
        profile = op_profile(session, one, bench.profile_calls)  # after every timed figure, on its own instance

    start = time.perf_counter()
    cached = session.load_from_cache()
    cached_load_ms = 1000 * (time.perf_counter() - start) if cached else None
    runtime_details = session.details()
    by_batch = sweep["by_batch"]
    peak_key = max(by_batch, key=by_batch.__getitem__)
    return {
        "metrics": {
            "load_ms": loaded.load_ms,
            **({"load_cached_ms": cached_load_ms} if cached_load_ms is not None else {}),
            "first_infer_ms": first_infer_ms,
            "latency_ms": {k: v for k, v in latency.stats.to_dict().items() if k not in ("min", "max")},
            "noise_pct": latency.noise_pct,
            "stable": latency.noise_pct <= bench.latency.stability_pct,
            "throughput_sps": {
                "peak": by_batch[peak_key],
                "peak_batch": int(peak_key[1:]),
                "by_batch": by_batch,
                "stopped_by": sweep["stopped_by"],
            },
            "throughput_concurrent": concurrent,
            "peak_rss_mb": max(sampler.peaks["load"], sampler.peaks["latency"]),
            "footprint_mb": max(sampler.peaks["load"], sampler.peaks["latency"]) - baseline_mb,
            "load_rss_mb": load_rss_mb,
            "rss_mb_by_batch": sweep["rss_mb_by_batch"],
            "cpu_util_pct": {"latency": latency_cpu.util_pct, "sweep": sweep_cpu.util_pct},
            "energy": energy,
            **(meter.figures() if isinstance(meter, GpuMeter) else {}),
            "dims": source.get("dims", {}),
            "fixed_batch": fixed,
            **({"latency_ms_by_dim": by_dim} if by_dim else {}),
            "accuracy": {k: accuracy[k] for k in ("metric", "value", "delta")},
            "fidelity": fidelity,
            **(
                {"inference_precision": runtime_details["inference_precision"]}
                if "inference_precision" in runtime_details
                else {}
            ),
        },
        "profile": profile,
        "details": {
            "import_ms": loaded.import_ms,
            "runtime_rss_mb": loaded.runtime_rss_mb,
            "phase_s": {"import": loaded.import_ms / 1000, "load": loaded.load_ms / 1000, **phases},
            "baseline_rss_mb": baseline_mb,
            "rss_mb_after_sweep": sampler.peaks.get("latency_after_sweep"),
            "latency_min_ms": latency.stats.min,
            "latency_max_ms": latency.stats.max,
            "stability": {
                "segments": len(segments),
                "segment_p50_ms": {f"s{i}": m / 1e6 for i, m in enumerate(latency.segment_medians_ns)},
                "window_spread_pct": latency.window_spread_pct,
                "windows": latency.windows,
                "seconds": latency.seconds,
                **latency_cpu.other_load(),
            },
            "accuracy": accuracy | {"eval_samples": len(reference), "eval_origin": reference.origin},
            "runtime_settings": runtime_details,
            "batching": batching | {"eval_batch": eval_batch, "sweep": [f"b{b}" for b in sizes]},
        },
    }


def throughput_sweep(
    session: Session, reference: DataSet, sizes: list[int], config: ThroughputConfig, sampler: RssSampler
) -> dict[str, Any]:
    """Samples per second of one synchronous caller at each batch size, the same loop for every
    runtime, with the peak RSS at each. It stops when a batch gains less than `min_gain_pct` over
    the previous one, or when one call takes longer than `max_call_s`; `stopped_by` says which."""
    by_batch: dict[str, float] = {}
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
            by_batch[key] = measure_throughput(call, size, config.seconds)
        rss[key] = sampler.peaks[key]
        previous = list(by_batch.values())[-2] if len(by_batch) > 1 else None
        if previous is not None and by_batch[key] < previous * (1 + config.min_gain_pct / 100):
            gain = 100 * (by_batch[key] / previous - 1)
            stopped_by = f"batch {size} gained {gain:+.1f}% over the previous one (< {config.min_gain_pct:g}%)"
            break
    return {"by_batch": by_batch, "rss_mb_by_batch": rss, "stopped_by": stopped_by}


def concurrent_throughput(session: Session, one: Arrays, batch: int, bench: BenchConfig) -> dict[str, Any]:
    """Samples per second with several batch-1 requests in flight: a server's view, beside the
    single-caller sweep (labelled with how many requests and how they were driven)."""
    queue = session.async_queue(one, bench.throughput.concurrent_requests or bench.resolved_threads())
    value = measure_concurrent(queue, batch, bench.throughput.seconds)
    return {"sps": value, "batch": batch, **queue.details()}


def latency_by_dim(session: Session, config: ModelConfig, source: dict[str, Any], bench: Any) -> dict[str, Any]:
    """Batch-1 latency at each value of `dim_sweep`'s dimensions (one latency segment each), on
    inputs generated at that size; the other dimensions keep their values. Keys are the values
    (a dict: DVC drops lists)."""
    result: dict[str, Any] = {}
    for dim, values in config.dim_sweep.items():
        result[dim] = {}
        for value in values:
            dims = source.get("dims", {}) | {dim: value}
            inputs = generate_inputs(config.inputs, source.get("fixed_batch") or 1, 0, dims, source.get("vocab_size"))
            call = session.prepare(inputs)
            warm_up(call, bench.warmup)
            stats = measure_latency(call, bench.latency).stats.to_dict()
            result[dim][str(value)] = {k: stats[k] for k in ("p50", "p90", "p99", "n")}
    return result
