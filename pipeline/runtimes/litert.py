"""LiteRT (ai-edge-litert): a .tflite file in the interpreter its users run, with its default XNNPACK
delegate, `threads` given to both. The interpreter is not thread-safe: concurrent requests each get their
own (request_sessions). The TFLite source (pipeline.prepare.sources.tflite) reads and runs files with the
same helpers.

Names: a file with a `serving_default` signature (what TensorFlow's converter writes) is named by its
signature's keys; one without (MediaPipe's) by its tensors' names. Outputs are rows first, as TFLite's are.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from pipeline.core.data import Arrays
from pipeline.runtimes import base
from pipeline.runtimes.base import Session

SIGNATURE = "serving_default"


class Config(base.Config):
    """What the LiteRT adapter reads of its build's runtime_config (beside layout and code_root)."""

    output_names: list[str] | None = None  # the names the outputs go by, in order


class Details(base.Details):
    """What its sessions report (Session.details); None in a record written before the key was."""

    threads: int | None = None
    delegate: str | None = None
    litert: str | None = None  # the package's version


class Tensor(NamedTuple):
    """One input or output of a .tflite file as the interpreter reports it."""

    name: str  # the signature's key, else the tensor's name, made a plain identifier
    tensor: str  # the tensor's own name in the file (what tf2onnx and OpenVINO name it)
    index: int
    shape: list[int]  # -1 where the file leaves an axis open (shape_signature)
    dtype: str
    scale: float  # quantization: real = scale * (q - zero_point); 0.0 for a float tensor
    zero_point: int


def plain_name(tensor: str) -> str:
    """'serving_default_image:0' -> 'serving_default_image': names the pipeline can key files with."""
    return re.sub(r"\W", "_", tensor.split(":")[0]).strip("_") or "tensor"


def interpreter(path: Path, threads: int | None = None) -> Any:
    """The LiteRT interpreter over the file, XNNPACK as its default delegate (as LiteRT's users run it)."""
    from ai_edge_litert.interpreter import Interpreter

    return Interpreter(model_path=str(path), num_threads=threads)


def signature_tensors(model: Any) -> tuple[list[Tensor], list[Tensor]]:
    """The file's inputs and outputs, in the signature's order and names where it has one."""

    def described(details: dict[str, Any], name: str) -> Tensor:
        scale, zero_point = details["quantization"]
        return Tensor(name, details["name"], details["index"], [int(d) for d in details["shape_signature"]],
                      np.dtype(details["dtype"]).name, float(scale), int(zero_point))  # fmt: skip

    by_index = {d["index"]: d for d in [*model.get_input_details(), *model.get_output_details()]}
    signatures = model.get_signature_list()
    if SIGNATURE in signatures:
        runner = model.get_signature_runner(SIGNATURE)
        return tuple(  # type: ignore[return-value]
            [described(by_index[d["index"]], key) for key, d in side.items()]
            for side in (runner.get_input_details(), runner.get_output_details())
        )
    return tuple(  # type: ignore[return-value]
        [described(d, plain_name(d["name"])) for d in side] for side in (model.get_input_details(),
                                                                         model.get_output_details())
    )  # fmt: skip


def spec_names(inputs: list[Tensor], outputs: list[Tensor], output_names: list[str]) -> dict[str, str]:
    """Each tensor's name in the file -> the spec's (the inputs' own, the outputs' as the source names them):
    how the ONNX export and OpenVINO's TFLite front end, which name ports after the tensors, are renamed."""
    return {t.tensor: t.name for t in inputs} | {t.tensor: name for t, name in zip(outputs, output_names, strict=True)}


def quantized(tensors: list[Tensor]) -> bool:
    """A full-integer model: its inputs and outputs are integer tensors with a scale."""
    return bool(tensors) and all(t.scale > 0 and t.dtype in ("int8", "uint8", "int16") for t in tensors)


def full_integer(tensors: list[Tensor]) -> str | None:
    """A full-integer model said with its inputs' and outputs' scales and zero points, else None."""
    if not quantized(tensors):
        return None
    scales = ", ".join(f"{t.name} scale {t.scale:.6g} zero point {t.zero_point}" for t in tensors)
    return f"a full-integer (INT8) TFLite model ({scales})"


class TfliteRunner:
    """Calls of one interpreter on arrays by input name: the batch axis resized where the file leaves it open
    (the interpreter keeps its tensors allocated while the shapes stay the same)."""

    def __init__(self, path: Path, threads: int | None = None) -> None:
        self.model = interpreter(path, threads)
        self.inputs, self.outputs = signature_tensors(self.model)
        self._shapes: dict[int, tuple[int, ...]] = {}
        self.model.allocate_tensors()

    def set(self, arrays: Arrays) -> None:
        """Put `arrays` into the input tensors (resized first where their shapes changed)."""
        resized = False
        for tensor in self.inputs:
            shape = arrays[tensor.name].shape
            if self._shapes.get(tensor.index) != shape:
                self.model.resize_tensor_input(tensor.index, list(shape), strict=False)
                self._shapes[tensor.index], resized = shape, True
        if resized:
            self.model.allocate_tensors()
        for tensor in self.inputs:
            self.model.set_tensor(tensor.index, np.ascontiguousarray(arrays[tensor.name], dtype=tensor.dtype))

    def run(self, arrays: Arrays) -> Arrays:
        self.set(arrays)
        self.model.invoke()
        return {tensor.name: self.model.get_tensor(tensor.index) for tensor in self.outputs}  # get_tensor copies


class LiteRtSession(Session):
    def __init__(self, path: Path, threads: int, config: Config) -> None:
        self._path, self._config, self._threads = path, config, threads
        self._runner = TfliteRunner(path, threads)
        self.input_names = [t.name for t in self._runner.inputs]
        self.output_names = config.output_names or [t.name for t in self._runner.outputs]

    def run(self, inputs: Arrays) -> Arrays:
        return dict(zip(self.output_names, self._runner.run(inputs).values(), strict=True))

    def prepare(self, inputs: Arrays) -> Callable[[], Any]:
        """invoke() and the outputs read out (get_tensor copies them), as a caller of the interpreter does and as
        the other runtimes' calls return theirs."""
        self._runner.set(inputs)
        model, outputs = self._runner.model, [t.index for t in self._runner.outputs]

        def call() -> list[Any]:
            model.invoke()
            return [model.get_tensor(index) for index in outputs]

        return call

    def request_sessions(self, requests: int, threads: int) -> tuple[list[Session], str]:
        each = max(1, threads // requests)
        sessions: list[Session] = [LiteRtSession(self._path, each, self._config) for _ in range(requests)]
        return sessions, f"an interpreter per request, {each} thread(s) each (an interpreter is not thread-safe)"

    def details(self) -> dict[str, Any]:
        import ai_edge_litert

        version = getattr(ai_edge_litert, "__version__", "unknown")
        return Details(threads=self._threads, delegate="XNNPACK (the interpreter's default)", litert=version).as_dict()


def load(artifact: Path, threads: int, config: Config, target: str = "cpu") -> LiteRtSession:
    return LiteRtSession(artifact, threads, config)
