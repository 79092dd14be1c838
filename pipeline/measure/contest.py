"""The select stage's side-by-side re-measure: which contenders are one model, and their timing, each in a
worker process of its own, one block at a time (pipeline.measure.interleaved's race).

The decision on what these figures mean (who is tied, who lost, the tie-break) is
pipeline.decide.contest's; benchmark scripts call `measure_contenders` to time their own pairs the
way the select stage does.
"""

from __future__ import annotations

import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from pipeline.core import layout
from pipeline.core.config import ContestConfig, Params
from pipeline.core.data import sample_batch
from pipeline.core.isolate import call
from pipeline.core.line_process import WorkerFailed
from pipeline.core.records import source as source_record
from pipeline.machine.lock import machine_lock
from pipeline.measure import interleaved
from pipeline.measure.contest_worker import InWorker
from pipeline.measure.harness import warm_up
from pipeline.measure.identity import signature
from pipeline.measure.loading import load_variant
from pipeline.measure.stage import thread_env


def identical_groups(variants: list[str], root: Path, model: str) -> dict[str, list[str]]:
    """Representative (the first of `variants`, in rank order) -> every variant that is the same model."""
    groups: dict[str, list[str]] = {}
    for variant in variants:
        groups.setdefault(signature(layout.variant_dir(model, variant, root)), []).append(variant)
    return {members[0]: members for members in groups.values()}


def measure_contenders(
    model: str,
    variants: list[str],
    params: Params,
    root: Path,
    batch: int = 1,
    folders: dict[str, str] | None = None,
    baseline: str | None = None,
) -> dict[str, Any]:
    """Run the contest in a fresh process (the coordinator), holding the machine, with the bench's threads
    (`batch` and `folders`, where each variant was built if not in its folder: for benchmark scripts;
    `baseline`: the contender every speed-up is stated against)."""
    with machine_lock(exclusive=True):
        return call(
            f"{__name__}:contest",
            {
                "model": model,
                "variants": variants,
                "percentile": params.select.percentile,
                "config": params.select.contest.model_dump(),
                "root": str(root),
                "batch": batch,
                "folders": folders,
                "baseline": baseline,
            },
            timeout=params.bench.timeout_s,
            env=thread_env(params.bench.resolved_threads()),
            log=layout.log_file(model, "contest", "select", root),
        )


def contest(
    model: str,
    variants: list[str],
    percentile: str,
    config: dict[str, Any],
    root: str = ".",
    folders: dict[str, str] | None = None,
    batch: int = 1,
    baseline: str | None = None,
    worker_command: list[str] | None = None,
) -> dict[str, Any]:
    """Interleaved timing of `variants` of `model` at `batch` (the select stage's, at batch 1 or the model's
    fixed batch); `folders` names where each was built when not in its variant folder (a benchmark's
    recipes). Each contender in a worker of its own (`isolation: workers`, `worker_command`: the tests' stub
    worker), or all in this process (`one process`). A contender that cannot load is `failed`, not fatal."""
    settings = ContestConfig.model_validate(config)
    base = Path(root)
    rows = source_record.load(model, base).fixed_batch or batch
    folder = {v: str(Path(folders[v]) if folders else layout.variant_dir(model, v, base)) for v in variants}
    if settings.isolation == "one process":
        calls, runtimes = {}, {}
        for variant in variants:
            loaded = load_variant(model, Path(folder[variant]), base)
            calls[variant] = loaded.session.prepare(sample_batch(loaded.reference.inputs, rows))
            runtimes[variant] = loaded.session.details()
            warm_up(calls[variant], loaded.params.bench.warmup)
        result = interleaved.race(calls, percentile, settings, baseline)
        return result | {"runtime_settings": runtimes, "batch": rows, "isolation": settings.isolation}
    requests = {
        v: {"model": model, "folder": folder[v], "root": root, "batch": rows, "config": config} for v in variants
    }
    result = race_in_workers(requests, percentile, settings, baseline, worker_command)
    return result | {"batch": rows, "isolation": settings.isolation}


def race_in_workers(
    requests: dict[str, dict[str, Any]],
    percentile: str,
    settings: ContestConfig,
    baseline: str | None = None,
    worker_command: list[str] | None = None,
) -> dict[str, Any]:
    """The race with each contender in a worker process of its own (pipeline.measure.contest_worker, or
    `worker_command` speaking its protocol), started from its request. The workers load side by side
    (nothing is timed yet), then warm up one at a time; one that cannot start, or dies mid-contest, is
    `failed` with its error and the others race on."""
    with ExitStack() as stack:
        workers, failed = {}, {}
        for variant, request in requests.items():
            workers[variant] = InWorker(request, command=worker_command)
            stack.callback(workers[variant].close)
        for variant, worker in list(workers.items()):
            try:
                worker.loaded()
                worker.warm()
            except WorkerFailed as error:
                failed[variant] = f"could not start: {error}"
                del workers[variant]
        where = "each in a worker process of its own (loaded as deployed)"
        result = interleaved.race(workers, percentile, settings, baseline, failed, where)
    for variant, why in result["failed"].items():
        print(f"contest: {variant} {why}", file=sys.stderr)
    runtimes = {v: w.runtime for v, w in workers.items() if v in result["latency_ms"]}
    return result | {"runtime_settings": runtimes}
