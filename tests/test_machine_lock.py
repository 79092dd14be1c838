"""Builds share the machine, a benchmark has it alone: the lock between DVC stage processes."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from pipeline.machine.lock import machine_lock

HOLD = "from pipeline.machine.lock import machine_lock; import sys, time, pathlib\n" \
       "with machine_lock(sys.argv[1] == 'exclusive', pathlib.Path(sys.argv[2])):\n" \
       "    print('held', flush=True); time.sleep(float(sys.argv[3]))\n"  # fmt: skip


def holder(mode: str, lock: Path, seconds: float) -> subprocess.Popen:
    process = subprocess.Popen(
        [sys.executable, "-c", HOLD, mode, str(lock), str(seconds)], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout.readline().strip() == "held"
    return process


def test_builds_share_the_machine(tmp_path):
    lock = tmp_path / "machine.lock"
    other_build = holder("shared", lock, 2.0)
    with machine_lock(False, lock) as waited:
        assert waited < 0.5
    other_build.wait()


def test_a_benchmark_waits_for_builds_and_builds_wait_for_a_benchmark(tmp_path):
    lock = tmp_path / "machine.lock"
    build = holder("shared", lock, 1.0)
    with machine_lock(True, lock) as waited:
        assert waited > 0.5  # the benchmark started only once the build let go
    build.wait()
    bench = holder("exclusive", lock, 1.0)
    start = time.perf_counter()
    with machine_lock(False, lock):
        assert time.perf_counter() - start > 0.5
    bench.wait()
