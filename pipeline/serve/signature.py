"""The artifact's tensors as its model file declares them (names, v2 datatypes, shapes with -1 for a
dynamic axis), read with the runtime package alone so a lean serving image can answer metadata."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from pipeline.core.errors import ModelFileError
from pipeline.core.records.manifest import Manifest
from pipeline.serve.protocol import datatype


@dataclass(frozen=True)
class TensorSpec:
    name: str
    datatype: str
    shape: list[int]

    def as_metadata(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class Signature:
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]


def read_signature(folder: Path, manifest: Manifest) -> Signature:
    path = folder / manifest.entry
    if manifest.runtime == "onnxruntime":
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        types = {"tensor(float)": "float32", "tensor(float16)": "float16", "tensor(double)": "float64"}

        def spec(arg: object) -> TensorSpec:
            kind = arg.type  # type: ignore[attr-defined]
            dtype = types.get(kind) or kind.removeprefix("tensor(").removesuffix(")")
            shape = [d if isinstance(d, int) else -1 for d in arg.shape]  # type: ignore[attr-defined]
            return TensorSpec(arg.name, datatype(np.dtype(dtype)), shape)  # type: ignore[attr-defined]

        return Signature([spec(a) for a in session.get_inputs()], [spec(a) for a in session.get_outputs()])
    if manifest.runtime == "openvino":
        import openvino as ov

        model = ov.Core().read_model(str(path))

        def port(p: ov.Output) -> TensorSpec:
            shape = [d.get_length() if d.is_static else -1 for d in p.get_partial_shape()]
            return TensorSpec(p.any_name, datatype(np.dtype(p.get_element_type().to_dtype())), shape)

        return Signature([port(p) for p in model.inputs], [port(p) for p in model.outputs])
    raise ModelFileError(f"{path}: runtime {manifest.runtime!r}: only ONNX and OpenVINO files have a v2 signature")
