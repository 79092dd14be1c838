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

import time
from pathlib import Path
from typing import Any

from pipeline.core.config import ModelConfig
from pipeline.core.data import run_batched, sample_batch
from pipeline.core.evaluate import Judging, edge_block, fidelity_block
from pipeline.core.memory import RssSampler
from pipeline.core.records import Accuracy, Measured, RuntimeSettings, Stability
from pipeline.core.records import source as source_record
from pipeline.core.records.source import SourceRecord
from pipeline.core.task_metrics import accuracy_block, resolve
from pipeline.measure.budget import ContentionScreen, contention_screen, eval_batch, eval_rows
from pipeline.measure.clock import CpuClock, PhaseTimes
from pipeline.measure.energy import EnergyMeter
from pipeline.measure.gpu import GpuMeter
from pipeline.measure.harness import (
    latency_uncertainty,
    measure_latency,
    warm_up,
)
from pipeline.measure.loading import Loaded, load_variant
from pipeline.measure.profile import op_profile
from pipeline.measure.sweeps import measure_sweeps


def measure_latency_only(model: str, artifact: str, root: str = ".") -> dict[str, Any]:
    """Batch-1 latency alone, the way `measure` takes it: for benchmark scripts comparing variants."""
    loaded = load_variant(model, Path(artifact), Path(root))
    call = loaded.session.prepare(sample_batch(loaded.reference.inputs, 1))
    warm_up(call, loaded.params.bench.warmup)
    latency = measure_latency(call, loaded.params.bench.latency)
    return {
        "load_ms": loaded.load_ms,
        "latency_ms": latency.stats.model_dump(),
        **latency_uncertainty(latency, loaded.params.bench),
        "runtime": loaded.session.details(),
    }


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
    metric = resolve(config.metric, source.model, loaded.root)  # a metric that cannot load fails before any timing
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
    labelled = bool(reference.targets) and metric is not None
    rows = eval_rows(len(reference), labelled, bench.unlabelled_rows, short=verdict.budget == "short")
    scored = reference.head(rows.used)
    batch = eval_batch(peak, bench, max_batch, fixed)
    with phases.timed("accuracy"):
        outputs = run_batched(session.run, scored.inputs, batch, fixed is not None)
        accuracy = accuracy_block(metric, scored.targets, scored.outputs, outputs)
        judging = Judging.of(config, source.export.producers)
        fidelity = fidelity_block(scored.outputs, outputs, judging=judging)
        if (edges := loaded.edges) is not None:
            edge_outputs = run_batched(session.run, edges.inputs, batch, fixed is not None)
            edge_rows = edge_block(edges, edge_outputs, judging)
    with phases.timed("profile"):
        calls = bench.profile_calls if verdict.budget == "full" else bench.profile_calls_short
        profile = op_profile(session, one, calls)  # after every timed figure, on its own instance

    start = time.perf_counter()
    cached = session.load_from_cache()
    cached_load_ms = 1000 * (time.perf_counter() - start) if cached else None
    runtime_settings = RuntimeSettings.model_validate(session.details())
    peak_rss = max(sampler.peaks["load"], sampler.peaks["latency"])
    measured = Measured(
        load_ms=loaded.load_ms,
        **({"load_cached_ms": cached_load_ms} if cached_load_ms is not None else {}),
        first_infer_ms=first_infer_ms,
        latency_ms=latency.stats,
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
        **({"edge_rows": edge_rows} if loaded.edges is not None else {}),
        fidelity_batch=batch,
        eval_rows=rows,
        **({"inference_precision": executed} if (executed := runtime_settings.inference_precision) else {}),
        import_ms=loaded.import_ms,
        runtime_rss_mb=loaded.runtime_rss_mb,
        phase_s={"import": loaded.import_ms / 1000, "load": loaded.load_ms / 1000, **phases},
        baseline_rss_mb=baseline_mb,
        memory_how=sampler.how,
        stability=Stability(
            blocks=latency.blocks,
            calls=latency.stats.n,
            seconds=latency.seconds,
            stopped_by=latency.stopped_by,
            **latency_cpu.other_load(),
        ),
        runtime_settings=runtime_settings,
        batching=source.batching.model_dump(exclude_none=True)
        | {"eval_batch": batch, "sweep": [f"b{b}" for b in sizes] if sweeps else []},
    )
    return {"measured": measured.model_dump(mode="json", exclude_unset=True), "profile": profile}
