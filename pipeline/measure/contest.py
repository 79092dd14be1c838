"""The select stage's side-by-side re-measure: which contenders are one model, and their timing, each in
worker processes of its own taking turns, one block at a time (pipeline.measure.interleaved's race).

The decision on what these figures mean (who is tied, who lost, the tie-break) is
pipeline.decide.contest's; benchmark scripts call `measure_contenders` to time their own pairs the
way the select stage does.
"""

from __future__ import annotations

import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np

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


def processes_that_fit(peak_rss_mb: list[float | None], wanted: int, share: float = 0.5) -> tuple[int, str]:
    """Worker processes per contender: `wanted`, or fewer (at least one) when that many of each contender's
    process, at its bench's peak RSS, would take more than `share` of the memory available now; and why, when
    fewer."""
    import psutil

    per_set = sum(mb or 0.0 for mb in peak_rss_mb)
    available = psutil.virtual_memory().available / 2**20
    fits = max(1, min(wanted, int(share * available // per_set) if per_set else wanted))
    if fits == wanted:
        return fits, ""
    sets = f"{wanted} sets of the contenders' processes ({per_set:.0f} MB at their bench peaks)"
    return fits, f"{fits} per contender, not {wanted}: {sets} would take over {share:.0%} of {available:.0f} MB free"


def measure_contenders(
    model: str,
    variants: list[str],
    params: Params,
    root: Path,
    batch: int = 1,
    folders: dict[str, str] | None = None,
    baseline: str | None = None,
    processes: int | None = None,
) -> dict[str, Any]:
    """Run the contest in a fresh process (the coordinator), holding the machine, with the bench's threads
    (`batch` and `folders`, where each variant was built if not in its folder: for benchmark scripts;
    `baseline`: the contender every speed-up is stated against; `processes`: per contender, instead of the
    contest's setting)."""
    settings = params.select.contest
    if processes is not None:
        settings = settings.model_copy(update={"processes": processes})
    with machine_lock(exclusive=True):
        return call(
            f"{__name__}:contest",
            {
                "model": model,
                "variants": variants,
                "percentile": params.select.percentile,
                "config": settings.model_dump(),
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


class Draws:
    """One contender held by several worker processes that take turns, one block per round each in order
    (pipeline.measure.interleaved.Contender). A process draws its speed: the same ONNX Runtime file of
    genomad's trees read 8.8 us a call in one process and 12.5-13.2 us in another, every time it was timed
    there (an A/A pair in two workers read x1.42-1.49, 'slower'); resemblyzer's 4 ms LSTM 2-4% apart. A ratio
    over rounds that cycle through each contender's processes carries that draw into its interval instead of
    deciding on it. `draw_ms`: each process's median block figure, for the record."""

    def __init__(self, workers: list[InWorker]) -> None:
        self.workers, self.blocks = workers, 0
        self.figures: list[list[float]] = [[] for _ in workers]
        self.per_call_s = 0.0

    def warm(self) -> None:
        """Each process's warm-up, one after the other: resemblyzer's two torch_eager workers warming up side by
        side on two cores took a minute (its threaded regions, it seems, waiting on descheduled threads)."""
        for worker in self.workers:
            worker.warm()
        self.per_call_s = float(np.median([w.per_call_s for w in self.workers]))

    def block(self, calls: int) -> tuple[np.ndarray, float]:
        turn = self.blocks % len(self.workers)
        times, waited = self.workers[turn].block(calls)
        self.blocks += 1
        self.figures[turn].append(float(np.median(times)) / 1e6)
        return times, waited

    def draw_ms(self) -> list[float]:
        return [round(float(np.median(f)), 6) for f in self.figures if f]


def race_in_workers(
    requests: dict[str, dict[str, Any]],
    percentile: str,
    settings: ContestConfig,
    baseline: str | None = None,
    worker_command: list[str] | None = None,
) -> dict[str, Any]:
    """The race with each contender in `settings.processes` worker processes of its own (pipeline.measure.
    contest_worker, or `worker_command` speaking its protocol), started from its request, taking turns round
    by round (`Draws`). The workers load side by side (nothing is timed yet), then warm up one at a time; a
    contender one of whose processes cannot start, or dies mid-contest, is `failed` with its error and the
    others race on."""
    with ExitStack() as stack:
        contenders, failed = {}, {}
        for variant, request in requests.items():
            workers = [InWorker(request, command=worker_command) for _ in range(settings.processes)]
            for worker in workers:
                stack.callback(worker.close)
            contenders[variant] = Draws(workers)
        for variant, held in list(contenders.items()):
            try:
                for worker in held.workers:
                    worker.loaded()
                held.warm()
            except WorkerFailed as error:
                failed[variant] = f"could not start: {error}"
                del contenders[variant]
        where = (
            f"each in {settings.processes} worker processes of its own taking turns round by round (loaded as"
            " deployed; a process draws its speed)"
            if settings.processes > 1
            else "each in a worker process of its own (loaded as deployed)"
        )
        result = interleaved.race(contenders, percentile, settings, baseline, failed, where)
    for variant, why in result["failed"].items():
        print(f"contest: {variant} {why}", file=sys.stderr)
    runtimes = {v: c.workers[0].runtime for v, c in contenders.items() if v in result["latency_ms"]}
    return result | {"runtime_settings": runtimes, "processes": settings.processes}
