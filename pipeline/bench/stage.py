"""The bench stage: measure one built variant in a fresh process, on the machine whose pipeline
runs it, and write its metrics file under that machine's folder (machines/<name>/).

reports/metrics/<model>/<variant>.json always gets written, with status ok / skipped / failed and
a one-line reason, so `dvc metrics show` lists every variant and why it has no numbers. It holds
the numbers users compare; reports/details/<model>/<variant>.json holds how they came about
(build facts, runtime settings, stability windows), kept out of the metrics so that
`dvc metrics show` stays readable.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pipeline import layout
from pipeline.config import Params
from pipeline.files import read_json, size_mb, write_json
from pipeline.isolate import IsolatedFailure, call
from pipeline.machine_lock import machine_lock
from pipeline.machines import require_here
from pipeline.target_probe import recorded_probe


def thread_env(threads: int) -> dict[str, str]:
    """Thread pools that read the environment get the runtime's thread count.

    OpenMP, MKL and OpenBLAS take a number. XLA's CPU backend (JAX) has no count, only one thread
    or all cores, so with one thread it is told to stay single-threaded.
    """
    env = dict.fromkeys(("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"), str(threads))
    if threads == 1:
        env["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    return env


def write_plan(machine: str, params: Params, root: Path = Path(".")) -> dict[str, Any]:
    """The bench settings with `threads` resolved for this machine: what every bench stage follows.

    Bench stages depend on this file rather than on the `bench` params directly: DVC reads
    params.yaml once per stage that declares params, and one stage reading it instead of 64 keeps
    a no-op `dvc repro` fast. Changing `bench` reruns this stage, which reruns every benchmark.
    """
    plan = params.bench.model_dump(mode="json") | {"threads_resolved": params.bench.resolved_threads()}
    write_json(layout.bench_plan(layout.machine_root(machine, root)), plan)
    return plan


def benchmark_variant(machine: str, model: str, variant: str, params: Params, root: Path = Path(".")) -> dict[str, Any]:
    """Measure `variant` of `model` here, for `machine`: refused on any other machine class."""
    here = require_here(machine, root)
    results = layout.machine_root(machine, root)
    artifact = layout.built_dir(model, variant, params.machine_built(variant), machine, root)
    build = read_json(artifact / layout.BUILD_INFO)
    threads = params.bench.resolved_threads()
    metrics: dict[str, Any] = {
        "status": build["status"],
        "reason": build["reason"],
        "runtime": build["runtime"],
        "precision": build["precision"],
        "device": build.get("target", "cpu"),
        "threads": threads,
        "machine": here["name"],
    }
    probe = recorded_probe(metrics["device"], results)
    if "gpu" in probe:  # a usable GPU target: which GPU the figures belong to
        metrics["gpu"] = {k: probe[k] for k in ("gpu", "driver", "compute_capability")}
    details: dict[str, Any] = {"build": build["build"]}
    profile: dict[str, Any] = {"reason": f"not measured: the variant is {build['status']}"}
    if build["status"] == "ok":
        metrics["size_mb"] = size_mb(artifact, exclude=frozenset({layout.BUILD_INFO}))
        try:
            with machine_lock(exclusive=True) as waited:  # the machine to itself: no build, no other benchmark
                start = time.perf_counter()
                result = call(
                    "pipeline.bench.worker:measure",
                    {"model": model, "artifact": str(artifact), "root": str(root)},
                    timeout=params.bench.timeout_s,
                    env=thread_env(threads),
                    log=layout.log_file(model, variant, "bench", results),
                )
            metrics |= result["metrics"]
            details |= result["details"] | {
                "process_s": round(time.perf_counter() - start, 3),
                "waited_s": round(waited, 3),  # for the machine lock: builds or a benchmark were running
            }
            profile = result["profile"]
            metrics |= honest_precision(build["precision"], metrics.get("inference_precision"))
            metrics |= in_sample(build["build"], read_json(layout.source_dir(model, root) / layout.SOURCE_INFO))
        except IsolatedFailure as failure:
            command = f"python stages/bench.py {machine} {model} {variant}"
            metrics |= {"status": "failed", "reason": f"benchmark failed: {failure.evidence(command)}"}
            profile = {"reason": "not measured: the benchmark failed"}
    write_json(layout.details_file(model, variant, results), details)
    write_json(layout.profile_file(model, variant, results), profile)
    write_json(layout.metrics_file(model, variant, results), metrics)
    return metrics


OV_PRECISIONS = {"f32": "fp32", "bf16": "bf16", "f16": "fp16"}


def honest_precision(declared: str, executed: str | None) -> dict[str, str]:
    """`precision` as executed: OpenVINO's CPU plugin runs float parts in bf16 on CPUs with
    AVX512-BF16/AMX unless pinned, so an `fp16` IR runs as bf16 and an INT8 model as int8 + bf16.
    The catalogue's precision stays as `precision_declared`."""
    if executed is None:
        return {}
    name = OV_PRECISIONS.get(executed, executed)
    actual = f"int8+{name}" if declared == "int8" else name
    return {"precision": actual, "precision_declared": declared}


def in_sample(build: dict[str, Any], source: dict[str, Any]) -> dict[str, str]:
    """`in_sample`: why this variant's figures are not held out (the user's calib_data repeats
    scoring rows), or nothing. Calibrated variants record calibration_origin, tuned ones validation_origin."""
    held_out = source.get("held_out", {})
    shared = [
        f"{held_out[role]['rows_in_scoring']} of the scoring rows are {role} rows"
        for role, used in (("calibration", "calibration_origin"), ("validation", "validation_origin"))
        if used in build and held_out.get(role, {}).get("rows_in_scoring")
    ]
    return {"in_sample": "; ".join(shared)} if shared else {}
