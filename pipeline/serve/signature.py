"""A deployed model's tensors as the model file declares them: names, Open Inference Protocol (KServe v2)
datatypes and shapes (-1 where a dimension is dynamic, the batch axis included).

Read from the file with its own runtime, never from the manifest: a server's model metadata and a
Triton config must describe what the engine will load. A lean serving image uses this module, so it
imports numpy, pipeline.core and the runtime (lazily) only: no onnx package, no tritonclient.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.core import onnx_files
from pipeline.core.errors import ModelFileError, first_line
from pipeline.core.records.manifest import Manifest

# numpy dtype name <-> Open Inference Protocol datatype (bfloat16 has no numpy dtype)
NUMPY_TO_V2 = {
    "bool": "BOOL", "uint8": "UINT8", "uint16": "UINT16", "uint32": "UINT32", "uint64": "UINT64",
    "int8": "INT8", "int16": "INT16", "int32": "INT32", "int64": "INT64",
    "float16": "FP16", "float32": "FP32", "float64": "FP64", "object": "BYTES", "bytes": "BYTES",
}  # fmt: skip
V2_TO_NUMPY = {v2: name for name, v2 in NUMPY_TO_V2.items() if name != "bytes"}
# Open Inference Protocol datatype -> Triton's model-config DataType enum name (model_config.proto);
# names, not tritonclient's enum, so this module needs no tritonclient
V2_TO_TRITON = {
    "BOOL": "TYPE_BOOL", "UINT8": "TYPE_UINT8", "UINT16": "TYPE_UINT16", "UINT32": "TYPE_UINT32",
    "UINT64": "TYPE_UINT64", "INT8": "TYPE_INT8", "INT16": "TYPE_INT16", "INT32": "TYPE_INT32",
    "INT64": "TYPE_INT64", "FP16": "TYPE_FP16", "FP32": "TYPE_FP32", "FP64": "TYPE_FP64", "BF16": "TYPE_BF16",
    "BYTES": "TYPE_STRING",
}  # fmt: skip
# ONNX Runtime's NodeArg.type and OpenVINO's element type names
ORT_TO_V2 = {
    "tensor(bool)": "BOOL", "tensor(uint8)": "UINT8", "tensor(uint16)": "UINT16", "tensor(uint32)": "UINT32",
    "tensor(uint64)": "UINT64", "tensor(int8)": "INT8", "tensor(int16)": "INT16", "tensor(int32)": "INT32",
    "tensor(int64)": "INT64", "tensor(float16)": "FP16", "tensor(float)": "FP32", "tensor(double)": "FP64",
    "tensor(bfloat16)": "BF16", "tensor(string)": "BYTES",
}  # fmt: skip
OPENVINO_TO_V2 = {
    "boolean": "BOOL", "u8": "UINT8", "u16": "UINT16", "u32": "UINT32", "u64": "UINT64", "i8": "INT8",
    "i16": "INT16", "i32": "INT32", "i64": "INT64", "f16": "FP16", "f32": "FP32", "f64": "FP64", "bf16": "BF16",
    "string": "BYTES",
}  # fmt: skip


def v2_datatype(dtype: Any) -> str:
    """The Open Inference Protocol datatype of a numpy dtype (or its name)."""
    name = np.dtype(dtype).name
    if name not in NUMPY_TO_V2:
        raise ValueError(f"numpy dtype {name} has no Open Inference Protocol datatype")
    return NUMPY_TO_V2[name]


def numpy_dtype(datatype: str) -> np.dtype:
    """The numpy dtype a v2 datatype's values arrive as."""
    if datatype not in V2_TO_NUMPY:
        raise ValueError(f"datatype {datatype} has no numpy dtype")
    return np.dtype(V2_TO_NUMPY[datatype])


def triton_type(datatype: str) -> str:
    """Triton's DataType enum name (TYPE_FP32) for a v2 datatype."""
    if datatype not in V2_TO_TRITON:
        raise ValueError(f"datatype {datatype} has no Triton data type")
    return V2_TO_TRITON[datatype]


@dataclass(frozen=True)
class TensorSpec:
    """One input or output: its v2 datatype and full shape (-1: any size)."""

    name: str
    datatype: str
    shape: list[int]


@dataclass(frozen=True)
class Signature:
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]


def read_signature(folder: Path, manifest: Manifest) -> Signature:
    """The tensors of deploy folder `folder`'s artifact, read by its runtime, in the manifest's order.
    ONNX files (ONNX Runtime) and OpenVINO IR only: the engines the model repositories serve."""
    path = folder / manifest.entry
    if not manifest.entry or not path.is_file():
        raise ModelFileError(
            f"{path}: no model file here (manifest entry {manifest.entry!r}, runtime {manifest.runtime})"
        )
    if manifest.runtime == "onnxruntime" and path.suffix == ".onnx":
        inputs, outputs = _onnxruntime_ports(path)
    elif manifest.runtime == "openvino" and path.suffix in (".xml", ".onnx"):
        inputs, outputs = _openvino_ports(path)
    else:
        raise ModelFileError(
            f"{path}: runtime {manifest.runtime!r} with a {path.suffix or 'folder'} entry: only ONNX files "
            "(onnxruntime) and OpenVINO IR (openvino) have a tensor signature here"
        )
    return Signature(
        _ordered(path, "input", inputs, list(manifest.inputs), every=True),
        _ordered(path, "output", outputs, manifest.outputs, every=False),
    )


Ports = dict[str, Callable[[], TensorSpec]]  # each tensor's name and how to describe it (raising if it cannot)


def _ordered(path: Path, kind: str, found: Ports, names: list[str], every: bool) -> list[TensorSpec]:
    """The manifest's tensors in its order; every input must be one (a server must feed them all), an
    output the manifest does not name is left out (and need not be a tensor: an ONNX-ML map, say)."""
    if not names:
        names = list(found)
    missing = [name for name in names if name not in found]
    extra = [name for name in found if name not in names] if every else []
    if missing or extra:
        raise ModelFileError(
            f"{path}: the manifest's {kind}s ({', '.join(names)}) are not the model's ({', '.join(found) or 'none'})"
        )
    return [found[name]() for name in names]


def _onnxruntime_ports(path: Path) -> tuple[Ports, Ports]:
    import onnxruntime as ort

    options = onnx_files.session_options()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # its declared tensors, fast
    options.log_severity_level = 3
    try:
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as error:
        raise ModelFileError(f"{path}: onnxruntime cannot load it ({first_line(error)})") from None

    def spec(arg: Any) -> TensorSpec:
        if arg.type not in ORT_TO_V2:
            raise ModelFileError(f"{path}: {arg.name} is a {arg.type}: not a tensor a v2 server can carry")
        return TensorSpec(arg.name, ORT_TO_V2[arg.type], [d if isinstance(d, int) and d > 0 else -1 for d in arg.shape])

    def ports(args: list[Any]) -> Ports:
        return {arg.name: (lambda arg=arg: spec(arg)) for arg in args}

    return ports(session.get_inputs()), ports(session.get_outputs())


def _openvino_ports(path: Path) -> tuple[Ports, Ports]:
    import openvino as ov

    try:
        model = ov.Core().read_model(str(path))
    except Exception as error:
        raise ModelFileError(f"{path}: openvino cannot read it ({first_line(error)})") from None

    def spec(port: Any) -> TensorSpec:
        name, element = port.any_name, port.get_element_type().get_type_name()
        shape = port.get_partial_shape()
        if element not in OPENVINO_TO_V2:
            raise ModelFileError(f"{path}: {name} has element type {element}: no v2 datatype")
        if shape.rank.is_dynamic:
            raise ModelFileError(f"{path}: {name} has a dynamic rank: a v2 server needs its number of dimensions")
        return TensorSpec(name, OPENVINO_TO_V2[element], [d.get_length() if d.is_static else -1 for d in shape])

    def ports(found: list[Any]) -> Ports:
        unnamed = [p.get_node().get_friendly_name() for p in found if not p.get_names()]
        if unnamed:
            raise ModelFileError(f"{path}: {', '.join(unnamed)}: a port without a tensor name (v2 names every tensor)")
        return {port.any_name: (lambda port=port: spec(port)) for port in found}

    return ports(model.inputs), ports(model.outputs)
