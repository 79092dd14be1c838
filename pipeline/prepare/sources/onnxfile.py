"""ONNX source: an existing .onnx file (weights inside, or in external data files beside it).

The reference outputs come from ONNX Runtime at FP32. Files from other exporters often fix the
batch (to 1) and bake it into Reshape shapes: such a model is taken as it is, run at its batch,
and the spec declares it (`shape: [1, 3, 224, 224]`). `make_batch_dynamic: true` tries to relax
the batch axis and keeps the result only when it is proven: batch 2 must equal two batch-1 calls.

A scikit-learn model converted by skl2onnx with its defaults returns its probabilities through a
ZipMap (a sequence of {class: probability} maps): the graph is read with that ZipMap replaced by its
input, the same probabilities as a float tensor [batch, classes] under the same output name, put
first (class scores are the first output: accuracy and top-1 agreement read it), as skl2onnx's own
`options={'zipmap': False}` would have written it. Its ONNX-ML operators (ai.onnx.ml) are run by ONNX
Runtime only: the entry says `onnx_ml: true` and the registry gives the other variants no stage.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx

from pipeline.core import onnx_files
from pipeline.core.config import PARAMS_FILE, ExportConfig, ModelConfig
from pipeline.core.data import Arrays
from pipeline.core.errors import ConfigError, ModelFileError, first_line
from pipeline.core.inputs import outputs_rows_first, to_model_layout
from pipeline.prepare.sources.base import SourceModel, output_names

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
RELAXED_BATCH = "batch"
ONNX_ML = "ai.onnx.ml"


def onnx_ml_operators(model: onnx.ModelProto) -> list[str]:
    """The ONNX-ML operator types the graph uses (TreeEnsembleClassifier, Scaler, ZipMap), sorted."""
    return sorted({node.op_type for node in model.graph.node if node.domain == ONNX_ML})


def zipmap_as_tensor(model: onnx.ModelProto) -> list[str]:
    """Replace each ZipMap by its input under the same output name (a float tensor [batch, classes]) and
    move those outputs first, in place; their names (none: the graph is unchanged)."""
    batch = onnx.TensorShapeProto.Dimension()
    if model.graph.input:
        batch.CopyFrom(model.graph.input[0].type.tensor_type.shape.dim[0])
    names = []
    for node in model.graph.node:
        if node.op_type != "ZipMap" or node.domain != ONNX_ML:
            continue
        labels = next(a for a in node.attribute if a.name.startswith("classlabels"))
        classes = len(labels.ints) or len(labels.strings)
        node.op_type, node.domain = "Identity", ""
        del node.attribute[:]
        names.append(node.output[0])
        for output in model.graph.output:
            if output.name == node.output[0]:
                output.type.Clear()
                output.type.tensor_type.elem_type = onnx.TensorProto.FLOAT
                output.type.tensor_type.shape.dim.add().CopyFrom(batch)
                output.type.tensor_type.shape.dim.add().dim_value = classes
    if names:
        first = [output for output in model.graph.output if output.name in names]
        ordered = [_copy(output) for output in [*first, *(o for o in model.graph.output if o.name not in names)]]
        del model.graph.output[:]
        model.graph.output.extend(ordered)
    return names


def _copy(value: onnx.ValueInfoProto) -> onnx.ValueInfoProto:
    copy = onnx.ValueInfoProto()
    copy.CopyFrom(value)
    return copy


def graph_inputs(model: onnx.ModelProto) -> dict[str, onnx.ValueInfoProto]:
    initializers = {i.name for i in model.graph.initializer}
    return {i.name: i for i in model.graph.input if i.name not in initializers}


def input_dims(value: onnx.ValueInfoProto) -> list[int | str]:
    return [d.dim_value if d.HasField("dim_value") else d.dim_param for d in value.type.tensor_type.shape.dim]


def check_spec(model: onnx.ModelProto, config: ModelConfig, path: Path, field: str) -> None:
    """The catalog's input spec must name the graph's inputs with matching rank, dims and dtype.

    A dimension the file fixes must be declared with that number (a fixed batch included); a
    dimension the file leaves open may be declared as a symbol or a number."""
    inputs = graph_inputs(model)
    if set(inputs) != set(config.inputs):
        raise ConfigError(
            f"{PARAMS_FILE}: {field}.inputs: names {sorted(config.inputs)} "
            f"do not match the inputs of {path}: {sorted(inputs)}"
        )
    for name, spec in config.inputs.items():
        tensor = inputs[name].type.tensor_type
        dims = input_dims(inputs[name])
        where = f"{PARAMS_FILE}: {field}.inputs.{name}"
        if tensor.elem_type != ONNX_DTYPES[spec.dtype]:
            actual = onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type)
            raise ConfigError(f"{where}.dtype: {spec.dtype} declared, {path} expects {actual}")
        if len(dims) != len(spec.shape):
            raise ConfigError(f"{where}.shape: rank {len(spec.shape)} declared, {path} has {dims}")
        for i, (declared, actual) in enumerate(zip(spec.shape, dims, strict=True)):
            if isinstance(actual, int) and actual > 0 and declared != actual:
                what = "the batch axis" if i == 0 else f"dimension {i}"
                raise ConfigError(
                    f"{where}.shape: {path} fixes {what} to {actual}; declare it as {actual} (got {declared!r}; "
                    f"file shape {dims})"
                )


def check_operators(model: onnx.ModelProto, config: ModelConfig, path: Path, field: str) -> None:
    """A graph with ONNX-ML operators must say so (`onnx_ml: true`): the registry reads the entry, before
    any stage exists, to give the variants that cannot run them none."""
    if (found := onnx_ml_operators(model)) and not config.onnx_ml:
        raise ConfigError(
            f"{PARAMS_FILE}: {field}.onnx_ml: {path} uses ONNX-ML operators ({', '.join(found)}): set "
            "onnx_ml: true (python -m pipeline add writes it)"
        )


def read_model(path: Path, field: str) -> onnx.ModelProto:
    """The graph without its weights, checked; any failure names the file and the field."""
    try:
        onnx.checker.check_model(str(path))  # by path: weights in external data files are checked too
        return onnx.load(str(path), load_external_data=False)
    except Exception as error:
        raise ModelFileError(
            f"{path}: not a valid ONNX model ({PARAMS_FILE}: {field}.file): {first_line(error)}"
        ) from None


class OnnxSource(SourceModel):
    kind = "onnx"

    def __init__(self, name: str, config: ModelConfig, root: Path, dims: dict[str, int] | None = None) -> None:
        super().__init__(name, config, root, dims)
        path = self.require_file()
        model = read_model(path, self.field)
        check_spec(model, config, path, self.field)
        check_operators(model, config, path, self.field)
        self._zipmaps = zipmap_as_tensor(model)
        found = [o.name for o in model.graph.output]
        self._names = output_names(config, len(found), self.field, found)
        if self._names != found:
            raise ConfigError(
                f"{PARAMS_FILE}: {self.field}.outputs: {self._names} do not match the outputs of {path}: {found}"
            )
        self._session = _session(self._graph().SerializeToString() if self._zipmaps else path)
        self._output_axes = {} if config.rows_first or config.fixed_batch else self._probe_output_axes()

    @property
    def output_names(self) -> list[str]:
        return self._names

    @property
    def output_batch_axes(self) -> dict[str, int]:
        return self._output_axes

    def predict(self, inputs: Arrays) -> Arrays:
        return outputs_rows_first(self._run(inputs), self._output_axes)

    def _run(self, inputs: Arrays) -> Arrays:
        """The outputs as the model returns them, for rows-first inputs."""
        model_inputs = to_model_layout(inputs, self.config.inputs)
        return dict(zip(self._names, self._session.run(self._names, model_inputs), strict=True))

    def _probe_output_axes(self) -> dict[str, int]:
        """Which axis of each output holds the rows, for a model with scalar inputs or a batch axis after
        the first (its state comes back [layers, batch, hidden]): the axis that grows from 1 to 3 when the
        rows do. Only the outputs whose batch axis is not the first are returned."""
        self.probe(self._run)  # inputs the model rejects: one error naming the field
        one, three = self._run(self.example(1)), self._run(self.example(3))
        axes = {}
        for name in self._names:
            pairs = zip(one[name].shape, three[name].shape, strict=False)
            grown = [axis for axis, sizes in enumerate(pairs) if sizes == (1, 3)]
            if one[name].ndim != three[name].ndim or not grown:
                raise ConfigError(
                    f"{PARAMS_FILE}: {self.field}.inputs: output {name!r} has no axis that follows the rows "
                    f"({one[name].shape} for 1 row, {three[name].shape} for 3): the batch axis cannot be told"
                )
            if grown[0]:
                axes[name] = grown[0]
        return axes

    def _graph(self) -> onnx.ModelProto:
        """The user's graph with its weights, ZipMaps read as tensors."""
        model = onnx.load(str(self.path))
        zipmap_as_tensor(model)
        return model

    def export_onnx(self, path: Path, export: ExportConfig) -> dict[str, Any]:
        """The user's file, weights included: external data is kept external, in one side file."""
        model = self._graph()
        external = onnx_files.uses_external_data(self.path)
        report: dict[str, Any] = {"exporter": "none (ONNX source copied)", "export_s": 0.0}
        if self._zipmaps:
            report["zipmap"] = f"{', '.join(self._zipmaps)}: the ZipMap's probabilities as a tensor, first"
        if moved := constants_as_initializers(model):
            report["constants_as_initializers"] = (
                f"{moved} Constant nodes' tensors made initializers (paddle2onnx keeps weights there, where ONNX "
                "Runtime's quantizers do not see them)"
            )
        if self.config.make_batch_dynamic:
            relaxed, outcome = self._relax_batch(model, path, external)
            report["make_batch_dynamic"] = outcome
            if relaxed:
                report["fixed_batch"] = None
                return report
        onnx_files.save(model, path, external=external)
        report["same_graph"] = not moved  # the source graph itself: export parity holds by construction
        return report

    def _relax_batch(self, model: onnx.ModelProto, path: Path, external: bool) -> tuple[bool, str]:
        """Make the batch axis symbolic; keep it only if batch 2 equals two batch-1 calls."""
        relaxed = onnx.ModelProto()
        relaxed.CopyFrom(model)
        del relaxed.graph.value_info[:]
        for value in [*graph_inputs(relaxed).values(), *relaxed.graph.output]:
            dims = value.type.tensor_type.shape.dim
            if len(dims):
                dims[0].Clear()
                dims[0].dim_param = RELAXED_BATCH
        onnx_files.save(relaxed, path, external=external)
        first = self.example()  # a batch of the fixed size
        second = {k: _other_row(v) for k, v in first.items()}
        n = 2 * len(next(iter(first.values())))
        try:
            together = _session(path).run(self._names, {k: np.concatenate([first[k], second[k]]) for k in first})
        except Exception as error:
            return False, f"kept fixed: the relaxed model fails at batch {n} ({first_line(error)})"
        apart = [self._session.run(self._names, half) for half in (first, second)]
        for i, name in enumerate(self._names):
            expected = np.concatenate([apart[0][i], apart[1][i]])
            if together[i].shape != expected.shape or not np.allclose(together[i], expected, atol=1e-5, rtol=1e-4):
                return False, f"kept fixed: at batch {n} output {name!r} differs from two calls at the fixed batch"
        return True, f"relaxed: batch {n} equals two calls at the fixed batch"


def constants_as_initializers(model: onnx.ModelProto) -> int:
    """Move the main graph's Constant nodes that hold a tensor of more than one value into initializers
    (the same values under the same names), so quantizers and weight compression see the weights an
    exporter wrote as Constants; returns how many moved. Subgraphs (an If's branches) keep theirs."""
    if model.ir_version < 4:  # before IR 4 an initializer must also be a graph input
        return 0
    outputs = {o.name for o in model.graph.output}
    kept, moved = [], 0
    for node in model.graph.node:
        value = node.attribute[0] if node.op_type == "Constant" and len(node.attribute) == 1 else None
        if value is None or value.name != "value" or node.output[0] in outputs or np.prod(value.t.dims) <= 1:
            kept.append(node)
            continue
        tensor = onnx.TensorProto()
        tensor.CopyFrom(value.t)
        tensor.name = node.output[0]
        model.graph.initializer.append(tensor)
        moved += 1
    if moved:
        del model.graph.node[:]
        model.graph.node.extend(kept)
    return moved


def _other_row(value: np.ndarray) -> np.ndarray:
    """A second sample unlike the first, so a model mixing samples across the batch shows it."""
    if value.dtype.kind == "f":
        return value * -0.5 + 0.25
    return value[:, ::-1].copy() if value.ndim > 1 else value


def _session(model: Path | bytes) -> Any:
    import onnxruntime as ort

    return ort.InferenceSession(model if isinstance(model, bytes) else str(model), providers=["CPUExecutionProvider"])


def load(name: str, config: ModelConfig, root: Path, dims: dict[str, int] | None = None) -> OnnxSource:
    return OnnxSource(name, config, root, dims)
