"""The artifact's batch-1 latency in an engine release's runtime version beside this pipeline's own
version, so that a repository written for an older release says what its runtime costs (or saves).

The choice was made on the pipeline's figures; the engine runs another version. Two processes run the
same script (pipeline/serve/in_runtime.py `time`) with the same file, inputs, threads and settings,
one in the release's environment (pipeline.serve.runtime_env) and one in this interpreter, and take
turns: a block of calls in one, then a block in the other, the order turned every round (AB, BA, ...),
with a pause between blocks so that a runtime's spinning thread pool has gone quiet before the other
starts (as pipeline.measure.interleaved does within one process). A round gives the ratio of the two
blocks' medians; the rounds give the ratio's interval (pipeline.core.stats.paired_ratio_interval).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline.core.data import Arrays
from pipeline.core.errors import Unavailable
from pipeline.core.line_process import LineProcess, WorkerFailed
from pipeline.core.stats import Interval, paired_ratio_interval
from pipeline.machine.lock import machine_lock
from pipeline.serve import in_runtime

BLOCK_S = 0.05  # one block of calls: short, so that most rounds fall inside one state of the machine
PAUSE_S = 0.02  # between blocks: the last runtime's threads stop spinning before the other's block
MIN_ROUNDS = 10
PRECISE_PCT = (
    3.0  # the ratio's interval this narrow (± percent) ends the timing before `seconds` (the contest's tie band)
)


@dataclass(frozen=True)
class SideBySide:
    """Both versions' batch-1 p50 and the ratio release / pipeline, per round, with its interval."""

    runtime: str
    release_version: str
    pipeline_version: str
    release_ms: float
    pipeline_ms: float
    ratio: Interval
    threads: int

    @property
    def text(self) -> str:
        ratio = self.ratio
        return (
            f"batch-1 p50 {self.release_ms:.3g} ms there against {self.pipeline_ms:.3g} ms on {self.runtime} "
            f"{self.pipeline_version} (this pipeline's), x{ratio.center:.2f} ({ratio.low:.2f}-{ratio.high:.2f}, "
            f"95%): {ratio.blocks} rounds of alternating {BLOCK_S * 1e3:.0f} ms blocks, one process each, "
            f"{self.threads} threads"
        )

    def to_dict(self) -> dict:
        return {
            "runtime": self.runtime,
            "release_version": self.release_version,
            "pipeline_version": self.pipeline_version,
            "release_p50_ms": self.release_ms,
            "pipeline_p50_ms": self.pipeline_ms,
            "ratio": self.ratio.center,
            "ratio_ci": self.ratio.to_dict(),
            "threads": self.threads,
            "how": f"batch 1, alternating {BLOCK_S * 1e3:.0f} ms blocks in two processes, {PAUSE_S * 1e3:.0f} ms apart",
        }


class Worker:
    """One `in_runtime.py time` process (pipeline.core.line_process): loaded, then one block of calls per ask."""

    def __init__(self, python: str, runtime: str, model: Path, inputs: Path, properties: dict, threads: int) -> None:
        command = [python, in_runtime.__file__, "time", runtime, str(model), str(inputs), json.dumps(properties),
                   str(threads)]  # fmt: skip
        self.process = LineProcess(command)
        self.version = self._answer("")["version"]

    def _answer(self, line: str) -> dict:
        try:
            return self.process.ask(line) if line else self.process.read()
        except WorkerFailed as error:
            self.process.close()
            raise Unavailable(f"the timing process stopped: {error}") from None

    def block(self, seconds: float) -> list[float]:
        return self._answer(f"block {seconds}")["ms"]

    def close(self) -> None:
        self.process.close()


def side_by_side(
    release_python: Path, runtime: str, model: Path, feeds: Arrays, properties: dict, threads: int, seconds: float
) -> SideBySide:
    """Time `model` on `feeds` in the release's runtime (`release_python`) and in this interpreter's, in
    turns, for MIN_ROUNDS rounds and then until the ratio's interval is within ±PRECISE_PCT or `seconds`
    have passed, holding the machine lock (no benchmark beside)."""
    with tempfile.TemporaryDirectory(prefix="side-by-side-") as tmp:
        inputs = Path(tmp) / "in.npz"
        np.savez(inputs, **feeds)
        with machine_lock(exclusive=True):
            workers = []
            try:
                for python in (str(release_python), sys.executable):
                    workers.append(Worker(python, runtime, model, inputs, properties, threads))
                times: list[list[float]] = [[], []]
                ratios: list[float] = []
                start = time.perf_counter()
                while len(ratios) < MIN_ROUNDS or (
                    time.perf_counter() - start < seconds and paired_ratio_interval(ratios).half_width_pct > PRECISE_PCT
                ):
                    medians = [0.0, 0.0]
                    order = (0, 1) if len(ratios) % 2 == 0 else (1, 0)
                    for index in order:
                        block = workers[index].block(BLOCK_S)
                        times[index] += block
                        medians[index] = float(np.median(block))
                        time.sleep(PAUSE_S)
                    ratios.append(medians[0] / medians[1])
            finally:
                for worker in workers:
                    worker.close()
    release, ours = workers
    return SideBySide(
        runtime=runtime,
        release_version=release.version,
        pipeline_version=ours.version,
        release_ms=float(np.median(times[0])),
        pipeline_ms=float(np.median(times[1])),
        ratio=paired_ratio_interval(ratios),
        threads=threads,
    )
