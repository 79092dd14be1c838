"""ONNX Runtime on the CPU execution provider."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import onnxruntime as ort

from pipeline.data import Arrays
from pipeline.runtimes.base import OpTime, Session


def session_options(threads: int) -> ort.SessionOptions:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return options


class OrtSession(Session):
    def __init__(self, path: Path, threads: int) -> None:
        self._path = path
        self._session = ort.InferenceSession(str(path), session_options(threads), providers=["CPUExecutionProvider"])
        self.input_names = [i.name for i in self._session.get_inputs()]
        self.output_names = [o.name for o in self._session.get_outputs()]
        self._threads = threads

    def run(self, inputs: Arrays) -> Arrays:
        return dict(zip(self.output_names, self._session.run(self.output_names, inputs), strict=True))

    def prepare(self, inputs: Arrays) -> Callable[[], Any]:
        run, names, feeds = self._session.run, self.output_names, dict(inputs)
        return lambda: run(names, feeds)

    def op_times(self, inputs: Arrays, calls: int) -> list[OpTime]:
        """ONNX Runtime's own profiler (enable_profiling) on a second session: kernel time per node."""
        options = session_options(self._threads)
        options.enable_profiling = True
        with tempfile.TemporaryDirectory(prefix="ort-profile-") as folder:
            options.profile_file_prefix = str(Path(folder) / "ort")
            session = ort.InferenceSession(str(self._path), options, providers=["CPUExecutionProvider"])
            for _ in range(calls):
                session.run(None, inputs)
            trace = json.loads(Path(session.end_profiling()).read_text())
        return [
            OpTime(event["args"].get("op_name", "?"), event["dur"] / 1000)
            for event in trace
            if event.get("cat") == "Node" and event.get("name", "").endswith("_kernel_time")
        ]

    def details(self) -> dict[str, Any]:
        return {"provider": "CPUExecutionProvider", "intra_op_threads": self._threads, "graph_optimization": "all"}


def load(artifact: Path, threads: int, config: dict[str, Any]) -> OrtSession:
    return OrtSession(artifact, threads)
