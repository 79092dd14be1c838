"""The session interface every runtime adapter implements."""

from __future__ import annotations

import queue
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pydantic import ConfigDict

from pipeline.core.data import Arrays
from pipeline.core.records.build import RuntimeConfig
from pipeline.core.records.measured import RuntimeSettings


class Config(RuntimeConfig):
    """A runtime's load settings (its build's `runtime_config`): an adapter with keys of its own subclasses this in
    its module as `Config`; one with none names this. A key the runtime does not read is an error naming it."""

    model_config = ConfigDict(extra="forbid")


class Details(RuntimeSettings):
    """What a session reports of its settings (Session.details, recorded as `runtime_settings`): each adapter
    subclasses this in its module as `Details` with its own keys; a key it does not declare is an error."""

    model_config = ConfigDict(extra="forbid")


def code_root(config: RuntimeConfig) -> Path:
    """Where a factory-based artifact imports the model's code from: the copy a deploy folder
    carries (`code_root`, set by pipeline.serve.predict), else the project root (the working directory)."""
    return Path(config.code_root or Path.cwd())


@dataclass(frozen=True)
class OpTime:
    """One operator execution as a profiler reports it."""

    op_type: str
    ms: float
    kernel: str = ""  # the implementation that ran, where the runtime says (OpenVINO: brgconv_avx512_amx_I8)


class AsyncQueue(Protocol):
    """Requests submitted without waiting for their results; the timing loop is pipeline.measure's."""

    requests: int

    def submit(self) -> None:
        """Start one request; blocks while all `requests` are busy."""

    def wait_all(self) -> None: ...

    def details(self) -> dict[str, Any]: ...


class ThreadQueue:
    """An AsyncQueue over prepared calls, one thread (and one call) per request in flight."""

    def __init__(self, calls: list[Callable[[], Any]], how: str = "") -> None:
        self.requests, self._how = len(calls), how
        self._idle: queue.SimpleQueue[Callable[[], Any]] = queue.SimpleQueue()
        for call in calls:
            self._idle.put(call)
        self._free = threading.Semaphore(self.requests)
        self._pool = ThreadPoolExecutor(self.requests)
        self._error: BaseException | None = None

    def submit(self) -> None:
        self._free.acquire()
        call = self._idle.get()

        def job() -> None:
            try:
                call()
            except BaseException as error:
                self._error = error
            finally:
                self._idle.put(call)
                self._free.release()

        self._pool.submit(job)

    def wait_all(self) -> None:
        for _ in range(self.requests):
            self._free.acquire()
        for _ in range(self.requests):
            self._free.release()
        if self._error is not None:
            raise self._error

    def details(self) -> dict[str, Any]:
        return {"requests": self.requests, "how": f"a thread per request, each with its own prepared call; {self._how}"}


class Session(ABC):
    """A loaded model. `run` is for correctness; `prepare` and `async_queue` give what pipeline.measure
    times (adapters do no timing themselves)."""

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

    def request_sessions(self, requests: int, threads: int) -> tuple[list[Session], str]:
        """The sessions `requests` concurrent requests run on, sharing `threads` threads in all, and
        how. Default: this session for every request, its thread pool being process-wide (PyTorch,
        TensorFlow and XLA fix theirs per process); ONNX Runtime gives each request its own."""
        return [self] * requests, f"one session shared by {requests} request threads (a process-wide pool of {threads})"

    def async_queue(self, inputs: Arrays, requests: int, threads: int) -> AsyncQueue:
        """Up to `requests` calls on `inputs` in flight at once: a thread per request, each on one of
        `request_sessions` (every runtime here releases the GIL while it computes); OpenVINO
        overrides it with its own asynchronous queue."""
        sessions, how = self.request_sessions(requests, threads)
        return ThreadQueue([s.prepare(inputs) for s in sessions], how)

    def op_times(self, inputs: Arrays, calls: int) -> list[OpTime]:
        """Time per operator execution over `calls` runs of `inputs`, from the runtime's own profiler,
        on a separately profiled instance (profiling overhead never enters a timed figure)."""
        raise NotImplementedError(f"no operator profiler is wired in for {type(self).__name__}")

    def load_from_cache(self) -> bool:
        """Load the artifact again from a warm compiled-model cache; False for runtimes with none."""
        return False

    def details(self) -> dict[str, Any]:
        """Runtime settings worth recording next to the numbers (threads, providers, hints)."""
        return {}
