"""The benchmark itself, run in a fresh process per variant (see pipeline.isolate).

Order matters: import the runtime (RSS baseline), load (load_ms), first call (first_infer_ms),
warm-up, a first batch-1 latency segment, the throughput sweep, the remaining latency segments
(apart in time from the first, so one slow spell of the machine does not decide the number), then
accuracy on the eval split. CPU utilisation covers the timed loops; peak RSS is the process's
high-water mark (ru_maxrss).
"""

from __future__ import annotations

import importlib
import resource
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from pipeline import layout
from pipeline.bench.harness import LatencyResult, measure_latency, warm_up
from pipeline.config import PARAMS_FILE, ModelConfig, Params, load_params
from pipeline.data import DataSet, generate_inputs, run_batched, sample_batch
from pipeline.evaluate import accuracy_block, fidelity_block
from pipeline.files import read_json
from pipeline.memory import batch_size
from pipeline.runtimes import RUNTIMES
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


def _rss_mb() -> float:
    return psutil.Process().memory_info().rss / 1e6


@dataclass
class Loaded:
    """A variant loaded by its runtime, with what it took to get there."""

    session: Session
    reference: DataSet
    params: Params
    import_ms: float
    runtime_rss_mb: float
    load_ms: float


def load_variant(model: str, variant: str, root: Path) -> Loaded:
    params = load_params(root / PARAMS_FILE)
    threads = params.bench.resolved_threads()
    build = read_json(layout.variant_dir(model, variant, root) / layout.BUILD_INFO)
    reference = DataSet.load(layout.source_dir(model, root) / layout.REFERENCE)

    start = time.perf_counter()
    adapter = importlib.import_module(RUNTIMES[build["runtime"]].module)
    import_ms = 1000 * (time.perf_counter() - start)
    runtime_rss_mb = _rss_mb()

    start = time.perf_counter()
    session = adapter.load(layout.variant_dir(model, variant, root) / build["entry"], threads, build["runtime_config"])
    load_ms = 1000 * (time.perf_counter() - start)
    return Loaded(session, reference, params, import_ms, runtime_rss_mb, load_ms)


def measure_latency_only(model: str, variant: str, root: str = ".") -> dict[str, Any]:
    """Batch-1 latency alone, the way `measure` takes it: for benchmark scripts comparing variants."""
    loaded = load_variant(model, variant, Path(root))
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


def measure(model: str, variant: str, root: str = ".") -> dict[str, Any]:
    loaded = load_variant(model, variant, Path(root))
    session, reference, bench = loaded.session, loaded.reference, loaded.params.bench
    config = loaded.params.model(model)
    load_ms, import_ms, rss_after_import = loaded.load_ms, loaded.import_ms, loaded.runtime_rss_mb

    source = read_json(layout.source_dir(model, Path(root)) / layout.SOURCE_INFO)
    fixed, batching = source.get("fixed_batch"), source.get("batching", {})
    one = sample_batch(reference.inputs, fixed or 1)  # "batch 1" is the fixed batch for fixed-batch models
    call = session.prepare(one)
    start = time.perf_counter()
    call()
    first_infer_ms = 1000 * (time.perf_counter() - start)

    process = psutil.Process()
    cpu_before, system_before, wall_before = process.cpu_times(), psutil.cpu_times(), time.perf_counter()
    warm_up(call, bench.warmup)
    segments = [measure_latency(call, bench.latency)]
    sweep = [fixed] if fixed else [b for b in bench.throughput.batches if b <= batching.get("max_batch", b)]
    by_batch = {
        f"b{size}": session.throughput(sample_batch(reference.inputs, size), size, bench.throughput.seconds)
        for size in sweep or [1]
    }
    warm_up(call, bench.warmup)
    segments += [measure_latency(call, bench.latency) for _ in range(bench.latency.segments - 1)]
    latency = LatencyResult.combine(segments)
    cpu_after, system_after, wall = process.cpu_times(), psutil.cpu_times(), time.perf_counter() - wall_before
    own = (cpu_after.user - cpu_before.user) + (cpu_after.system - cpu_before.system)
    cpu_pct = 100.0 * own / wall
    peak_key = max(by_batch, key=by_batch.__getitem__)

    by_dim = latency_by_dim(session, config, source, bench)
    eval_batch = batch_size(bench.eval_batch, batching, fixed)
    outputs = run_batched(session.run, reference.inputs, eval_batch, fixed is not None)
    accuracy = accuracy_block(config.metric, reference.labels, reference.outputs, outputs)
    fidelity = fidelity_block(reference.outputs, outputs, config.class_scores)

    cached_load_ms = session.cached_load_ms()
    runtime_details = session.details()
    return {
        "metrics": {
            "load_ms": load_ms,
            **({"load_cached_ms": cached_load_ms} if cached_load_ms is not None else {}),
            "first_infer_ms": first_infer_ms,
            "latency_ms": {k: v for k, v in latency.stats.to_dict().items() if k not in ("min", "max")},
            "noise_pct": latency.noise_pct,
            "stable": latency.noise_pct <= bench.latency.stability_pct,
            "throughput_sps": {
                "peak": by_batch[peak_key],
                "peak_batch": int(peak_key[1:]),
                "by_batch": by_batch,
                **session.concurrency(),
            },
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6,  # KiB on Linux
            "cpu_util_pct": cpu_pct,
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
        "details": {
            "import_ms": import_ms,
            "runtime_rss_mb": rss_after_import,
            "latency_min_ms": latency.stats.min,
            "latency_max_ms": latency.stats.max,
            "stability": {
                "segments": len(segments),
                "segment_p50_ms": {f"s{i}": m / 1e6 for i, m in enumerate(latency.segment_medians_ns)},
                "window_spread_pct": latency.window_spread_pct,
                "windows": latency.windows,
                "seconds": latency.seconds,
                **other_load(system_before, system_after, own, wall),
            },
            "accuracy": accuracy | {"eval_samples": len(reference), "eval_origin": reference.origin},
            "runtime": runtime_details,
            "batching": batching | {"eval_batch": eval_batch, "sweep": [f"b{b}" for b in sweep]},
        },
    }


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
