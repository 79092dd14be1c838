"""The session interface every runtime adapter implements."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipeline.bench.harness import measure_throughput
from pipeline.data import Arrays


def code_root(config: dict[str, Any]) -> Path:
    """Where a factory-based artifact imports the model's code from: the copy a deploy folder
    carries (`code_root`, set by pipeline.predict), else the project root (the working directory)."""
    return Path(config.get("code_root", Path.cwd()))


class Session(ABC):
    """A loaded model. `run` is for correctness; `prepare` and `throughput` are the timed paths."""

    input_names: list[str]
    output_names: list[str]

    @abstractmethod
    def run(self, inputs: Arrays) -> Arrays:
        """Outputs by name as numpy arrays."""

    def prepare(self, inputs: Arrays) -> Callable[[], Any]:
        """A zero-argument call that runs `inputs` with the least per-call overhead.

        Input conversion happens here, once, so the benchmark times the runtime, not our glue.
        """
        return lambda: self.run(inputs)

    def throughput(self, inputs: Arrays, batch: int, seconds: float) -> float:
        """Samples per second over back-to-back calls of one batch.

        Runtimes that execute several requests at once (OpenVINO's async queue) override this;
        `concurrency` says how many ran in parallel.
        """
        return measure_throughput(self.prepare(inputs), batch, seconds)

    def concurrency(self) -> dict[str, int]:
        """Streams and in-flight requests used by `throughput`."""
        return {"streams": 1, "requests": 1}

    def cached_load_ms(self) -> float | None:
        """Load time when a compiled-model cache is warm, for runtimes that keep one."""
        return None

    def details(self) -> dict[str, Any]:
        """Runtime settings worth recording next to the numbers (threads, providers, hints)."""
        return {}
