"""CPU time over the timed intervals only, ours and other processes' (and the hypervisor's steal), and
the wall time of each benchmark phase: figures about the timed calls, not about what ran between them."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psutil


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
