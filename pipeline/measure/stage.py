"""The bench stage: measure one built variant in a fresh process, holding the machine to itself.

Its record always gets written, with status ok / skipped / failed and a one-line reason, through
pipeline.core.records: the numbers users diff in reports/metrics/, the evidence (reason, every
percentile, per-batch figures, build facts, runtime settings, stability windows) in reports/details/.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pipeline.core import layout, records
from pipeline.core.config import Params
from pipeline.core.files import size_mb, write_json
from pipeline.core.isolate import IsolatedFailure, call
from pipeline.core.records import Kind, Measured, VariantRecord
from pipeline.core.records import build as build_record
from pipeline.core.records import profile as profile_record
from pipeline.core.records import source as source_record
from pipeline.core.records.build import BuildFacts
from pipeline.core.records.profile import Profile
from pipeline.core.records.source import SourceRecord
from pipeline.machine.lock import machine_lock
from pipeline.machine.naming import require_same_hardware
from pipeline.machine.probe import recorded_probe


def thread_env(threads: int) -> dict[str, str]:
    """Thread pools that read the environment get the runtime's thread count.

    OpenMP, MKL and OpenBLAS take a number. XLA's CPU backend (JAX) has no count, only one thread
    or all cores, so with one thread it is told to stay single-threaded.
    """
    env = dict.fromkeys(("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"), str(threads))
    if threads == 1:
        env["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    return env


def write_bench_plan(params: Params, root: Path = Path(".")) -> dict[str, Any]:
    """The bench settings with `threads` resolved for this machine: what every bench stage follows.

    Bench stages depend on this file rather than on the `bench` params directly: DVC reads
    params.yaml once per stage that declares params, and one stage reading it instead of 64 keeps
    a no-op `dvc repro` fast. Changing `bench` reruns this stage, which reruns every benchmark; so does
    changing select.objective: the out-of-contention screen (pipeline.measure.budget) skips the
    throughput sweep of a slow variant unless the objective is throughput.
    """
    plan = params.bench.model_dump(mode="json") | {
        "threads_resolved": params.bench.resolved_threads(),
        "select_objective": params.select.objective,
    }
    write_json(layout.bench_plan(root), plan)
    return plan


def benchmark_variant(model: str, variant: str, params: Params, root: Path = Path(".")) -> VariantRecord:
    """Measure `variant` of `model` here; refused when reports/env.json describes other hardware."""
    here = require_same_hardware(root)
    artifact = layout.variant_dir(model, variant, root)
    build = build_record.load(artifact)
    facts: dict[str, Any] = {
        "status": build.status,
        "kind": build.kind,
        "reason": build.reason,
        "runtime": build.runtime,
        "precision": build.precision,
        "device": build.target,
        "threads": params.bench.resolved_threads(),
        "machine": here.name,
        "build": build.build,
    }
    probe = recorded_probe(build.target, root)
    if probe.gpu:  # a usable GPU target: which GPU the figures belong to
        facts["gpu"] = probe.model_dump(include={"gpu", "driver", "compute_capability"})
    profile = Profile(reason=f"not measured: the variant is {build.status}")
    if build.ok:
        facts["size_mb"] = size_mb(artifact, exclude=frozenset({layout.BUILD_INFO}))
        try:
            with machine_lock(exclusive=True) as waited:  # the machine to itself: no build, no other benchmark
                start = time.perf_counter()
                result = call(
                    # a text-generation model is measured as a generator (TTFT, TPOT, tokens/s, perplexity)
                    f"pipeline.measure.{'generation' if params.model(model).generates else 'worker'}:measure",
                    {"model": model, "artifact": str(artifact), "root": str(root)},
                    timeout=params.bench.timeout_s,
                    env=thread_env(facts["threads"]),
                    log=layout.log_file(model, variant, "bench", root),
                )
            measured = Measured.model_validate(result["measured"])
            facts |= result["measured"] | {
                "process_s": round(time.perf_counter() - start, 3),
                "waited_s": round(waited, 3),  # for the machine lock: builds or a benchmark were running
            }
            profile = Profile.model_validate(result["profile"])
            facts |= honest_precision(build.precision, measured.inference_precision, build.build)
            facts |= in_sample(build.build, source_record.load(model, root))
        except IsolatedFailure as failure:
            command = f"python stages/bench.py {model} {variant}"
            facts |= {
                "status": "failed",
                "kind": Kind.FAILED,
                "reason": f"benchmark failed: {failure.evidence(command)}",
            }
            profile = Profile(reason="not measured: the benchmark failed")
    record = VariantRecord.model_validate(facts)
    profile_record.write(model, variant, profile, root)
    records.write(model, variant, record, root)
    return record


OV_PRECISIONS = {"f32": "fp32", "bf16": "bf16", "f16": "fp16"}


def honest_precision(declared: str, executed: str | None, build: BuildFacts | None = None) -> dict[str, str]:
    """`precision` as executed, from what the runtime reports (`inference_precision`, optionally
    "name (note)"): OpenVINO's CPU plugin runs float parts in bf16 on CPUs with AVX512-BF16/AMX
    unless pinned, so an `fp16` IR runs as bf16 and an INT8 model as int8 + bf16; ONNX Runtime's CPU
    provider runs an FP16 file on FP32 kernels. The catalogue's precision stays as `precision_declared`.
    An INT8 variant whose build found that the runtime did not quantize its activations at run time
    here (`activations_quantized_at_run_time`) ran float matrix products on INT8 weights: noted."""
    notes = []
    if build is not None and build.activations_quantized_at_run_time is False:
        notes.append(f"INT8 weights, float matrix products: {build.activations_check}")
    if executed is None and not notes:
        return {}
    name, _, note = (executed or declared).partition(" (")
    name = OV_PRECISIONS.get(name, name)
    actual = f"{declared}+{name}" if declared in ("int8", "int4") and executed else name
    notes = [note.rstrip(")")] * bool(note) + notes
    return {"precision": actual, "precision_declared": declared} | (
        {"precision_note": "; ".join(notes)} if notes else {}
    )


def in_sample(build: BuildFacts, source: SourceRecord) -> dict[str, str]:
    """`in_sample`: why this variant's figures are not held out (the user's calib_data repeats
    scoring rows), or nothing. Calibrated variants record calibration_origin, tuned ones validation_origin."""
    used = {"calibration": build.calibration_origin, "validation": build.validation_origin}
    shared = [
        f"{rows.rows_in_scoring} of the scoring rows are {role} rows"
        for role, rows in source.held_out.items()
        if used.get(role) is not None and rows.rows_in_scoring
    ]
    return {"in_sample": "; ".join(shared)} if shared else {}
