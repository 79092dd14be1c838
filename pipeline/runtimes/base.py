"""The session interface every runtime adapter implements."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from pipeline.data import Arrays


class Session(ABC):
    """A loaded model. `run` is for correctness; `prepare` is the timed path."""

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

    def details(self) -> dict[str, Any]:
        """Runtime settings worth recording next to the numbers (threads, providers, hints)."""
        return {}
