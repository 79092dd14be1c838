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

An output may hold its rows (the batch) on another axis than the first: a CTC recogniser's logits
[positions, batch, classes], a recurrent state [layers, batch, hidden]. Each output's rows axis is
found (OnnxSource._find_rows) and recorded (`output_batch_axes`), so every variant is compared rows
first; an output the file declares wrongly (a torch 1.9 LSTM export's [1, 'seqlen'] for logits
[T, 1, 8210]) is taken as it returns, noted, and declared so in the exported copy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from pipeline.core import onnx_files
from pipeline.core.config import PARAMS_FILE, ExportConfig, InputSpec, ModelConfig
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
    "str": onnx.TensorProto.STRING,  # text (a skl2onnx text pipeline, a tokenizer inside the graph)
}
RELAXED_BATCH = "batch"
ONNX_ML = "ai.onnx.ml"
ROWS = "__rows__"  # the batch axis's symbol while shape inference follows it through the graph
PROBE_ROWS = 2  # the rows an open batch is run at to see its outputs (and 1, to see which axes grow)
Dims = list[int | str]


ASSUMED = "assumed"  # a rows axis no run could tell from the others: `add` says so, and the flag that changes it


@dataclass(frozen=True)
class Rows:
    """Which axis of an output holds the rows, and what told it (given, graph, declared or run)."""

    axis: int
    how: str


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


def declared_shape(value: onnx.ValueInfoProto) -> Dims | None:
    """A shape as the file declares it, '?' for an open axis (no name, 0, -1), None where it declares none."""
    if not value.type.tensor_type.HasField("shape"):
        return None
    return [dim if _named(dim) else "?" for dim in input_dims(value)]


def _named(dim: int | str) -> bool:
    """A fixed size or a symbol's name, not a mark for an open axis (no name, '?', 0, -1)."""
    return dim > 0 if isinstance(dim, int) else dim not in ("", "?")


def matches(declared: Dims | None, actual: Sequence[int | str]) -> bool:
    """Whether a declared shape holds `actual` (what returns, or what inference gives): the same rank and
    each fixed size the same; a symbol takes any size. No declaration claims nothing, so it holds."""
    if declared is None:
        return True
    return len(declared) == len(actual) and all(
        not isinstance(d, int) or d == a for d, a in zip(declared, actual, strict=True)
    )


def graph_rows(model: onnx.ModelProto, specs: dict[str, InputSpec]) -> dict[str, Dims]:
    """The inferred shape of each output that shape inference gives the rows on exactly one axis (ROWS).

    A copy of the graph has every batched input's batch axis made the fresh symbol ROWS, and its
    value_info and declared output shapes cleared (an exporter's stale ones would win), then ONNX's own
    inference runs (strict_mode off: it never fails, it leaves what it cannot tell open). It may lose
    the batch (a Reshape that bakes it in, arithmetic on a Shape): those outputs are left to the
    declared shape and the run. ONNX Runtime's symbolic inference follows that arithmetic, but it is
    pure Python: 4.1 s on a YOLOv8n and 6.2 s (placing nothing) on PP-OCRv4's detector, against
    0.01-0.04 s here and a fraction of a second for the run that then tells."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    del copy.graph.value_info[:]
    for output in copy.graph.output:
        output.type.tensor_type.ClearField("shape")
    inputs = graph_inputs(copy)
    for name, spec in specs.items():
        if not spec.scalar:
            dim = inputs[name].type.tensor_type.shape.dim[spec.batch_axis]
            dim.Clear()
            dim.dim_param = ROWS
    try:
        inferred = onnx.shape_inference.infer_shapes(copy, strict_mode=False, data_prop=True)
    except Exception:  # a graph inference cannot read (over 2 GB inline): the declared shape and the run tell
        return {}
    shapes = {o.name: input_dims(o) for o in inferred.graph.output if o.type.tensor_type.HasField("shape")}
    return {name: dims for name, dims in shapes.items() if dims.count(ROWS) == 1}


def declared_rows(declared: Dims | None, shape: Sequence[int], batch: int | str | None) -> int | None:
    """The rows axis a declared shape names, when it holds what returns: its one axis that is the
    batch (`batch`: the fixed size, or the file's batch symbol); None when it names none or several."""
    if declared is None or batch is None or not matches(declared, shape):
        return None
    axes = [axis for axis, dim in enumerate(declared) if dim == batch]
    return axes[0] if len(axes) == 1 else None


def file_batch(model: onnx.ModelProto, config: ModelConfig) -> int | str | None:
    """The batch as the file writes it on its first batched input: a fixed size or a symbol (None: no name)."""
    name, spec = next((name, spec) for name, spec in config.inputs.items() if not spec.scalar)
    batch = input_dims(graph_inputs(model)[name])[spec.batch_axis]
    return batch if _named(batch) else None


def declare_as_returned(output: onnx.ValueInfoProto, rank: int, axis: int, batch: int | str) -> None:
    """Declare `output` with the rank it returns, `batch` on its rows axis and every other axis open (a
    size one input gives need not hold for others): an optimizer that trusts the declaration (onnxslim)
    would otherwise reshape the output to the wrong one."""
    shape = output.type.tensor_type.shape
    del shape.dim[:]
    for i in range(rank):
        dim = shape.dim.add()
        if i == axis and isinstance(batch, int):
            dim.dim_value = batch
        elif i == axis:
            dim.dim_param = batch


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


def check_file(path: Path, config: ModelConfig, field: str) -> None:
    """`python -m pipeline check`'s look inside an ONNX file (registry: Source.checks_file): it loads
    with its external weights, its inputs match the spec, its operators run here, its outputs are tensors."""
    model = read_model(path, field)
    check_spec(model, config, path, field)
    check_operators(model, config, path, field)
    if problem := non_tensor_output(model, path):
        raise ConfigError(f"{problem} ({PARAMS_FILE}: {field}.file)")


def non_tensor_output(model: Any, path: Path) -> str | None:
    """The first output the pipeline cannot compare (a sequence or a map, not a tensor), with the fix; the
    export would otherwise fail on it in every variant's stage. A ZipMap's is read as the tensor it maps
    (pipeline.prepare.sources.onnxfile)."""
    zipmapped = {node.output[0] for node in model.graph.node if node.op_type == "ZipMap"}
    for output in model.graph.output:
        if not output.type.HasField("tensor_type") and output.name not in zipmapped:
            kind = output.type.WhichOneof("value")
            return (
                f"{path}: output {output.name!r} is a {kind}, not a tensor: the pipeline compares tensors; export "
                "the model with tensor outputs"
            )
    return None


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
        self._locale = onnx_files.with_available_locale(model)  # a StringNormalizer's locale this machine lacks
        self._session = _session(model.SerializeToString() if self._zipmaps or self._locale else path)
        self._declared = {o.name: declared_shape(o) for o in model.graph.output}
        self._returned: dict[str, tuple[int, ...]] = {}  # what each output returns, where a run was needed
        self.rows = self._find_rows(model)
        self._output_axes = {name: rows.axis for name, rows in self.rows.items() if rows.axis}

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

    def _find_rows(self, model: onnx.ModelProto) -> dict[str, Rows]:
        """Each output's rows axis: `output_rows` (given) wins, then shape inference (graph_rows), then
        the declared shape where it holds what the model returns, then the run (_run_axes).

        A model whose batch is open, none given, whose graph puts every output's rows first and whose
        declared shapes agree is not run: the common file costs one shape inference, no session call.
        Any other runs once at its batch (a fixed one, else 2 rows), and once more to tell the rows apart
        where that is needed; the graph's answer must then hold what returns."""
        given, graph = self.config.output_rows, graph_rows(model, self.config.inputs)
        if not given and self.config.fixed_batch is None and self._rows_first_by(graph):
            return {name: Rows(0, "graph: shape inference carries the batch there") for name in self._names}
        n, batch = self._run_batch, file_batch(model, self.config)
        returned = self.probe(self._run, PROBE_ROWS)  # inputs the model rejects: one error naming the field
        self._returned = {name: value.shape for name, value in returned.items()}
        rows = {}
        for name, shape in self._returned.items():
            inferred = graph.get(name, [])
            if name in given:
                rows[name] = Rows(self._given(name, shape), "given: output_rows")
            elif inferred and len(inferred) == len(shape) and shape[inferred.index(ROWS)] == n:
                rows[name] = Rows(inferred.index(ROWS), "graph: shape inference carries the batch there")
            elif (axis := declared_rows(self._declared[name], shape, batch)) is not None:
                rows[name] = Rows(axis, f"declared: the file names the batch ({batch!r}) there")
        if left := [name for name in self._names if name not in rows]:
            axes, how = self._run_axes(returned)
            for name in left:
                rows[name] = self._one_axis(name, axes[name], how, n)
        return rows

    def _one_axis(self, name: str, axes: list[int], how: str, n: int) -> Rows:
        """The output's rows axis among the `axes` a run found following the rows. At a fixed batch of 1 every
        axis of size 1 follows them, and nothing tells them apart: the rows are taken where the inputs' batch
        sits (`output_rows` says otherwise); refused only when no axis can hold them."""
        if len(axes) == 1:
            return Rows(axes[0], how)
        batch_axis = self.config.batched_input.batch_axis
        if self.config.fixed_batch == 1 and batch_axis in axes:
            return Rows(batch_axis, f"{ASSUMED}: at the fixed batch 1 axes {axes} have size 1; the inputs' batch is "
                                    f"axis {batch_axis} (--output-rows {name}=AXIS to change)")  # fmt: skip
        raise self._untold(name, axes, n)

    @property
    def _run_batch(self) -> int:
        return self.config.fixed_batch or PROBE_ROWS

    def _rows_first_by(self, graph: dict[str, Dims]) -> bool:
        """Shape inference puts every output's rows first, and no declared shape says otherwise."""
        return all(
            name in graph and graph[name][0] == ROWS and matches(self._declared[name], graph[name])
            for name in self._names
        )

    def _given(self, name: str, shape: tuple[int, ...]) -> int:
        axis = self.config.output_rows[name]
        if axis >= len(shape):
            raise ConfigError(
                f"{PARAMS_FILE}: {self.field}.output_rows.{name}: axis {axis}, but the output returns {list(shape)}"
            )
        return axis

    def _run_axes(self, returned: Arrays) -> tuple[dict[str, list[int]], str]:
        """Each output's axes that follow the rows when the model runs, and how that was seen: at an open
        batch, those that grow from 1 row to 2; at a fixed batch B, those of size B, and for B > 1 only
        those along which the outputs reverse when the rows do."""
        fixed = self.config.fixed_batch
        if fixed is None:
            one = self._run(self.example(1))
            grown = {k: _grown(one[k].shape, v.shape) for k, v in returned.items()}
            return grown, "run: its one axis that grows from 1 row to 2"
        axes = {k: [a for a, size in enumerate(v.shape) if size == fixed] for k, v in returned.items()}
        if fixed == 1:
            return axes, "run: the one axis of size 1 at the fixed batch 1"
        reversed_rows = self._run({k: v[::-1] for k, v in self.example().items()})  # the rows `returned` came from
        follow = {
            k: [a for a in found if _same(np.flip(returned[k], a), reversed_rows[k])] for k, found in axes.items()
        }
        return follow, f"run: the one axis of size {fixed} that reverses with the rows"

    def _untold(self, name: str, axes: list[int], n: int) -> ConfigError:
        seen = f"axes {axes} follow the rows" if axes else "no axis follows the rows"
        return ConfigError(
            f"{PARAMS_FILE}: {self.field}.output_rows: output {name!r} returns {list(self._returned[name])} at "
            f"batch {n}, declared {self._declared[name]}: {seen}, so its rows (batch) axis cannot be told; say it "
            f"with output_rows: {{{name}: AXIS}} (python -m pipeline add: --output-rows {name}=AXIS)"
        )

    @property
    def notes(self) -> list[str]:
        """Each output whose rows are not on axis 0, where they are and what told it; each wrong declaration."""
        moved = [
            f"output {name!r}: rows on axis {rows.axis} ({rows.how})"
            for name, rows in self.rows.items()
            if rows.axis or rows.how.startswith(ASSUMED)
        ]
        return moved + list(self.declared_shape_notes.values())

    @property
    def declared_shape_notes(self) -> dict[str, str]:
        """One line per output whose declared shape does not hold what it returns (it is taken as returned)."""
        return {
            name: f"output {name!r} declared {self._declared[name]}, returns {list(shape)} at batch {self._run_batch}: "
            f"taken as returned, rows on axis {self.rows[name].axis}"
            for name, shape in self._returned.items()
            if not matches(self._declared[name], shape)
        }

    def _graph(self) -> onnx.ModelProto:
        """The user's graph with its weights, ZipMaps read as tensors, StringNormalizers at a locale this machine
        has."""
        model = onnx.load(str(self.path))
        zipmap_as_tensor(model)
        if self._locale:
            onnx_files.set_locale(model, str(self._locale["locale"]))
        return model

    def export_onnx(self, path: Path, export: ExportConfig) -> dict[str, Any]:
        """The user's file, weights included: external data is kept external, in one side file."""
        model = self._graph()
        external = onnx_files.uses_external_data(self.path)
        report: dict[str, Any] = {"exporter": "none (ONNX source copied)", "export_s": 0.0}
        if self._locale:
            report["rescues"] = [self._locale]
        if self._zipmaps:
            report["zipmap"] = f"{', '.join(self._zipmaps)}: the ZipMap's probabilities as a tensor, first"
        if notes := self.declared_shape_notes:
            report["declared_shape_notes"] = notes
            for output in model.graph.output:
                if output.name in notes:
                    rank, axis = len(self._returned[output.name]), self.rows[output.name].axis
                    declare_as_returned(output, rank, axis, self.config.fixed_batch or RELAXED_BATCH)
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
        """Make the batch axis symbolic (each output's rows axis); keep it only if batch 2 equals two batch-1
        calls."""
        relaxed = onnx.ModelProto()
        relaxed.CopyFrom(model)
        del relaxed.graph.value_info[:]
        inputs, outputs = graph_inputs(relaxed).values(), relaxed.graph.output
        for value, axis in [*((i, 0) for i in inputs), *((o, self._output_axes.get(o.name, 0)) for o in outputs)]:
            dims = value.type.tensor_type.shape.dim
            if len(dims) > axis:
                dims[axis].Clear()
                dims[axis].dim_param = RELAXED_BATCH
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
            expected = np.concatenate([apart[0][i], apart[1][i]], axis=self._output_axes.get(name, 0))
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


def _grown(one: tuple[int, ...], two: tuple[int, ...]) -> list[int]:
    """The axes that grow from 1 to 2 when the rows do (none when the rank changes)."""
    return [a for a, sizes in enumerate(zip(one, two, strict=True)) if sizes == (1, 2)] if len(one) == len(two) else []


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal up to float rounding (a row's place in the batch may change the kernels' sums)."""
    return bool(np.allclose(a, b, rtol=1e-3, atol=1e-5) if a.dtype.kind in "fc" else np.array_equal(a, b))


def _other_row(value: np.ndarray) -> np.ndarray:
    """A second sample unlike the first, so a model mixing samples across the batch shows it."""
    if value.dtype.kind == "f":
        return value * -0.5 + 0.25
    return value[:, ::-1].copy() if value.ndim > 1 else value


def _session(model: Path | bytes) -> Any:
    import onnxruntime as ort

    from pipeline.core import onnx_files

    model = model if isinstance(model, bytes) else str(model)
    return ort.InferenceSession(model, onnx_files.session_options(), providers=["CPUExecutionProvider"])


def load(name: str, config: ModelConfig, root: Path, dims: dict[str, int] | None = None) -> OnnxSource:
    return OnnxSource(name, config, root, dims)
