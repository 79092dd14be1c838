"""ONNX Runtime on the CPU execution provider."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import onnxruntime as ort

from pipeline.data import Arrays
from pipeline.runtimes.base import Session


class OrtSession(Session):
    def __init__(self, path: Path, threads: int) -> None:
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self._session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.input_names = [i.name for i in self._session.get_inputs()]
        self.output_names = [o.name for o in self._session.get_outputs()]
        self._threads = threads

    def run(self, inputs: Arrays) -> Arrays:
        return dict(zip(self.output_names, self._session.run(self.output_names, inputs), strict=True))

    def prepare(self, inputs: Arrays) -> Callable[[], Any]:
        run, names, feeds = self._session.run, self.output_names, dict(inputs)
        return lambda: run(names, feeds)

    def details(self) -> dict[str, Any]:
        return {"provider": "CPUExecutionProvider", "intra_op_threads": self._threads, "graph_optimization": "all"}


def load(artifact: Path, threads: int, config: dict[str, Any]) -> OrtSession:
    return OrtSession(artifact, threads)
