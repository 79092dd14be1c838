"""ONNX source: an existing .onnx file. The reference outputs come from ONNX Runtime at FP32."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import onnx

from pipeline.config import PARAMS_FILE, ExportConfig, ModelConfig
from pipeline.data import Arrays
from pipeline.errors import ConfigError, ModelFileError, first_line
from pipeline.sources.base import SourceModel, output_names

ONNX_DTYPES = {
    "float32": onnx.TensorProto.FLOAT,
    "float16": onnx.TensorProto.FLOAT16,
    "float64": onnx.TensorProto.DOUBLE,
    "int64": onnx.TensorProto.INT64,
    "int32": onnx.TensorProto.INT32,
    "int8": onnx.TensorProto.INT8,
    "uint8": onnx.TensorProto.UINT8,
    "bool": onnx.TensorProto.BOOL,
}


def graph_inputs(model: onnx.ModelProto) -> dict[str, onnx.ValueInfoProto]:
    initializers = {i.name for i in model.graph.initializer}
    return {i.name: i for i in model.graph.input if i.name not in initializers}


def check_spec(model: onnx.ModelProto, config: ModelConfig, path: Path, field: str) -> None:
    """The catalog's input spec must name the graph's inputs with matching rank, dims and dtype."""
    inputs = graph_inputs(model)
    if set(inputs) != set(config.inputs):
        raise ConfigError(
            f"{PARAMS_FILE}: {field}.inputs: names {sorted(config.inputs)} "
            f"do not match the inputs of {path}: {sorted(inputs)}"
        )
    for name, spec in config.inputs.items():
        tensor = inputs[name].type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else d.dim_param for d in tensor.shape.dim]
        where = f"{PARAMS_FILE}: {field}.inputs.{name}"
        if tensor.elem_type != ONNX_DTYPES[spec.dtype]:
            actual = onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type)
            raise ConfigError(f"{where}.dtype: {spec.dtype} declared, {path} expects {actual}")
        if len(dims) != len(spec.shape):
            raise ConfigError(f"{where}.shape: rank {len(spec.shape)} declared, {path} has {dims}")
        for i, (declared, actual) in enumerate(zip(spec.shape[1:], dims[1:], strict=True), start=1):
            if isinstance(actual, int) and actual > 0 and actual != declared:
                raise ConfigError(f"{where}.shape: dimension {i} is {declared}, {path} has {actual} ({dims})")
        if isinstance(dims[0], int) and dims[0] > 0:
            raise ConfigError(
                f"{where}.shape: {path} fixes the batch axis to {dims[0]}; export it with a dynamic batch"
            )


class OnnxSource(SourceModel):
    kind = "onnx"

    def __init__(self, name: str, config: ModelConfig, root: Path) -> None:
        super().__init__(name, config, root)
        path = self.require_file()
        try:
            model = onnx.load(str(path))
            onnx.checker.check_model(model)
        except Exception as error:
            raise ModelFileError(
                f"{path}: not a valid ONNX model ({PARAMS_FILE}: {self.field}.file): {first_line(error)}"
            ) from None
        check_spec(model, config, path, self.field)
        self._names = output_names(config, len(model.graph.output), self.field, [o.name for o in model.graph.output])
        if self._names != [o.name for o in model.graph.output]:
            raise ConfigError(
                f"{PARAMS_FILE}: {self.field}.outputs: {self._names} do not match the outputs of {path}: "
                f"{[o.name for o in model.graph.output]}"
            )
        import onnxruntime as ort

        self._session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])

    @property
    def output_names(self) -> list[str]:
        return self._names

    def predict(self, inputs: Arrays) -> Arrays:
        return dict(zip(self._names, self._session.run(self._names, inputs), strict=True))

    def export_onnx(self, path: Path, export: ExportConfig) -> dict[str, Any]:
        shutil.copy2(self.path, path)
        return {"exporter": "none (ONNX source copied)", "export_s": 0.0}


def load(name: str, config: ModelConfig, root: Path) -> OnnxSource:
    return OnnxSource(name, config, root)
