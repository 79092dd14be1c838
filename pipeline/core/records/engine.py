"""A TensorRT engine's entry file (engine.json, beside its serialized engine): the TensorRT version and GPU it
was built for, its cache key, its inputs, outputs and optimization profile. Written by the tensorrt passes,
read by their runtime (pipeline.runtimes.trt), which refuses an engine built for another TensorRT or GPU;
here only."""

from __future__ import annotations

from pathlib import Path

from pipeline.core.files import read_json, write_json
from pipeline.core.records.base import Part


class EngineEntry(Part):
    engine: str  # the serialized engine's file, beside the entry
    tensorrt: str  # the version that built it
    gpu: str | None  # the GPU model and compute capability it was built on (pipeline.machine.probe)
    compute_capability: str | None
    key: str  # pipeline.machine.probe.engine_cache_key of the ONNX graph, TensorRT and GPU
    inputs: list[str]
    outputs: list[str]
    profile_shapes: dict[str, list[list[int]]]  # per input: its min, opt and max shape

    @property
    def built_for(self) -> tuple[str, str | None, str | None]:
        """TensorRT version, GPU, compute capability: what an engine is valid for."""
        return self.tensorrt, self.gpu, self.compute_capability


def write(entry: EngineEntry, path: Path) -> None:
    write_json(path, entry.model_dump(mode="json"))


def load(path: Path) -> EngineEntry:
    return EngineEntry.model_validate(read_json(path))
