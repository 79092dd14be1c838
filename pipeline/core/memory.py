"""How many samples fit in one batch: measured on the model, not assumed.

A batch of 256 is nothing for a 200-feature classifier and 13 GB of activations for VGG19 in
TensorFlow (measured: about 50 MB a sample at 224x224). The export stage measures the source
model's resident-memory growth over a probe batch, and every later step (reference prediction,
parity check, calibration, evaluation, the throughput sweep) keeps its batches within
`export.memory_budget_mb` of activations.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil

from pipeline.core.errors import PipelineError
from pipeline.core.records.source import Batching


def _hwm_mb() -> float | None:
    """This process's resident high-water mark (Linux VmHWM), MB; None where there is none."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024 / 1e6  # kB (KiB) -> MB, as psutil figures are
    except OSError:
        return None
    return None


def _reset_hwm() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0: `echo 5 > /proc/self/clear_refs`)."""
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
        return True
    except OSError:
        return False


class RssSampler:
    """Peak resident memory of this process per named phase.

    Where the kernel allows it, the high-water mark (VmHWM) is reset when a phase starts and read
    when it ends: exact, and no thread runs beside the timed calls. Elsewhere a thread samples the
    current RSS every `interval_s` (psutil), and each phase is sampled at its start and end too.
    (ru_maxrss cannot be split by phase and, in a forked child, starts at the parent's.)"""

    def __init__(self, interval_s: float = 0.005) -> None:
        self.interval_s = interval_s
        self.peaks: dict[str, float] = {}
        self._process = psutil.Process()
        self._current: str | None = None
        self._lock = threading.Lock()
        self._done = threading.Event()
        self.exact = _reset_hwm() and _hwm_mb() is not None
        self.how = (
            "VmHWM reset at each phase's start, read at its end"
            if self.exact
            else f"RSS sampled every {interval_s * 1000:g} ms by a thread"
        )
        self._thread = None if self.exact else threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> RssSampler:
        if self._thread:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        if self._thread:
            self._thread.join()

    def _sample(self) -> None:
        rss = self._process.memory_info().rss / 1e6
        with self._lock:
            if self._current is not None:
                self.peaks[self._current] = max(self.peaks.get(self._current, 0.0), rss)

    def _run(self) -> None:
        while not self._done.wait(self.interval_s):
            self._sample()

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        if self.exact:
            _reset_hwm()
            try:
                yield
            finally:
                self.peaks[name] = max(self.peaks.get(name, 0.0), _hwm_mb() or 0.0)
            return
        with self._lock:
            self._current = name
        self._sample()
        try:
            yield
        finally:
            self._sample()
            with self._lock:
                self._current = None

    def now_mb(self) -> float:
        return self._process.memory_info().rss / 1e6


def peak_rss_mb(call: Callable[[], Any], interval_s: float = 0.0005) -> float:
    """Peak resident memory of this process while `call` runs (MB)."""
    with RssSampler(interval_s) as sampler, sampler.phase("call"):
        call()
    return sampler.peaks["call"]


def peak_rss_growth_mb(call: Callable[[], Any]) -> float:
    """Peak resident memory above the level before `call`."""
    baseline = psutil.Process().memory_info().rss / 1e6
    return max(0.0, peak_rss_mb(call) - baseline)


class ProbeLog:
    """Where the batch probe writes the batch it is about to run and the largest that ran, before each
    call: a process that a native abort (std::bad_alloc, SIGSEGV) kills mid-probe leaves what it learned
    (pipeline.prepare.export reads it and probes again below that batch)."""

    def __init__(self, path: Path | None) -> None:
        self.path, self.ran = path, 0

    def running(self, batch: int) -> None:
        if self.path is not None:
            self.path.write_text(json.dumps({"running": batch, "ran": self.ran}))

    def done(self, batch: int) -> None:
        self.ran = max(self.ran, batch)

    @staticmethod
    def died_at(path: Path) -> tuple[int, int] | None:
        """(the batch running, the largest that ran) when the probe died mid-call; None when it never
        started or ended."""
        if not path.is_file():
            return None
        found = json.loads(path.read_text())
        return (found["running"], found["ran"]) if found["running"] > found["ran"] else None

    def finished(self) -> None:
        self.running(0)  # nothing running: died_at finds no batch to cap at


def batch_limit(
    run_batch: Callable[[int], Any],
    budget_mb: float,
    fixed_batch: int | None,
    largest: int = 256,
    log: Path | None = None,
    capped_because: str = "",
) -> Batching:
    """The largest batch whose activations fit `budget_mb`, measured on the model.

    `run_batch(n)` runs the model on n samples. After one warm call (batch 1: weights, arenas),
    batches double until the process has grown by half the budget (or reach `largest`):
    allocators reuse freed memory, so a small probe batch shows too little growth to scale from.
    `log` (ProbeLog) keeps each call's batch where a native abort cannot erase it; `capped_because`
    says why `largest` is a cap on the batches run later too (a larger one killed the process).
    """
    probes = ProbeLog(log)

    def run(n: int) -> None:
        probes.running(n)
        run_batch(n)
        probes.done(n)

    baseline = psutil.Process().memory_info().rss / 1e6
    run(fixed_batch or 1)
    warm = psutil.Process().memory_info().rss / 1e6
    probe = fixed_batch or min(2, largest)
    while True:
        growth = max(0.0, peak_rss_mb(lambda n=probe: run(n)) - warm)
        if fixed_batch or growth >= budget_mb / 2 or probe >= largest:
            break
        probe = min(2 * probe, largest)
    probes.finished()
    per_sample = max(growth / probe, 0.01)
    available = psutil.virtual_memory().available / 1e6
    if per_sample * (fixed_batch or 1) > min(budget_mb, available):
        raise PipelineError(
            f"one batch of {fixed_batch or 1} needs about {per_sample * (fixed_batch or 1):,.0f} MB of activations: "
            f"more than export.memory_budget_mb ({budget_mb:,.0f}) or the {available:,.0f} MB available"
        )
    fits = max(1, int(budget_mb // per_sample))
    capped = f"; at most {largest}: {capped_because}" if capped_because else ""
    return Batching(
        max_batch=fixed_batch or (min(fits, largest) if capped_because else fits),
        per_sample_mb=per_sample,
        probe_batch=probe,
        warm_up_mb=warm - baseline,
        budget_mb=budget_mb,
        how="peak RSS of the source model over a doubling probe batch above its warm level, sampled every 0.5 ms"
        + capped,
    )


def batch_size(wanted: int, max_batch: int | None, fixed_batch: int | None) -> int:
    """`wanted`, capped to what fits (`max_batch`; None: not measured); exactly a fixed-batch model's batch."""
    return fixed_batch or max(1, min(wanted, max_batch or wanted))
