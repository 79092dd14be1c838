"""Benchmarks never run beside anything else on this machine; builds may run beside each other.

A reader-writer lock on one file per machine (flock): train, export and build stages hold it
shared, so several run at once (`dvc exp run --queue` + `dvc queue start -j N`, or two clones
side by side); a benchmark holds it exclusively, so it starts only when no build and no other
benchmark holds it, and none starts while it measures. How long a stage waited is recorded
(`waited_s` in the bench details). The lock lives in the system's temp folder, not the project:
experiment queues run each experiment in its own copy of the project, and all copies must share it.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK_FILE = Path(tempfile.gettempdir()) / "modelopt-pipeline.machine.lock"


@contextmanager
def machine_lock(exclusive: bool, path: Path = LOCK_FILE) -> Iterator[float]:
    """Hold the machine lock (exclusive for a benchmark, shared for a build); yields the seconds waited."""
    start = time.perf_counter()
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield time.perf_counter() - start
    finally:
        os.close(fd)  # closing the descriptor releases the lock
