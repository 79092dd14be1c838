"""`add` reading an ONNX file: each input's name, dtype, fixed and symbolic dims (a fixed first dim is a
fixed batch; a recurrent state's batch axis found), token inputs (integer inputs named like
`input_ids`, `attention_mask`, `token_type_ids`) with their vocabulary where the graph tells it (the
rows of the embedding table the ids index) or a config.json beside the file does, whether it is already
quantized, and a classifier's output (a ZipMap, a softmax)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipeline.core.errors import first_line
from pipeline.prepare.add.axes import axes_notes, spec_shape, symbol_of, token_kind
from pipeline.prepare.add.flags import Flags
from pipeline.prepare.add.inferred import AddError, Entry, Inferred, Input


def reads(path: Path) -> bool:
    return path.is_file() and path.suffix == ".onnx"


def inspect_onnx(name: str, path: Path, flags: Flags) -> Inferred:
    """The catalog entry an ONNX file implies, with the user's --dim, --vocab, --value (scalar inputs),
    --batch-axis and --output-rows flags; `name` is the model's (the entry does not need it). Where each
    output's rows are is found when the entry is checked, by loading the file as the export will
    (pipeline.prepare.add.transaction)."""
    import onnx

    from pipeline.core import onnx_files
    from pipeline.prepare.sources.onnxfile import (
        ONNX_DTYPES,
        graph_inputs,
        input_dims,
        non_tensor_output,
        onnx_ml_operators,
        zipmap_as_tensor,
    )

    try:
        onnx.checker.check_model(str(path))  # by path: external weights are checked too
        model = onnx.load(str(path), load_external_data=False)
    except Exception as error:
        raise AddError(f"{path}: not a valid ONNX model: {first_line(error)}") from None
    dtypes = {code: dtype for dtype, code in ONNX_DTYPES.items()}
    if problem := non_tensor_output(model, path):
        raise AddError(problem)
    zipmaps = zipmap_as_tensor(model)
    outputs = [output.name for output in model.graph.output]
    if unknown := sorted(set(flags.output_rows) - set(outputs)):
        raise AddError(f"{path}: --output-rows {', '.join(unknown)}: no such output (outputs: {outputs})")
    vocabularies = embedding_rows(model)
    config_vocab = _config_beside(path)
    dims, vocab = flags.dims, flags.vocab
    inputs: dict[str, Input] = {}
    used_dims: dict[str, int] = {}
    renamed: dict[str, str] = {}
    raw = {key: input_dims(value) for key, value in graph_inputs(model).items()}
    moved, notes = batch_axes_of(path, raw, flags.batch_axes)
    if unknown := sorted(set(flags.values) - {key for key, axes in raw.items() if not axes}):
        raise AddError(f"{path}: --value {', '.join(unknown)}: no such scalar input (shape [])")
    for input_name, value in graph_inputs(model).items():
        dtype = dtypes.get(value.type.tensor_type.elem_type)
        if dtype is None:
            found = onnx.helper.tensor_dtype_to_string(value.type.tensor_type.elem_type)
            raise AddError(f"{path}: input {input_name!r} is {found}: the pipeline feeds {', '.join(ONNX_DTYPES)}")
        if not raw[input_name]:  # a scalar: one value every call passes (--value, else the eval data's)
            inputs[input_name] = Input([], dtype, value=flags.values.get(input_name))
            given = (
                f"{flags.values[input_name]:g} on every call (--value)"
                if input_name in flags.values
                else "its value from the eval data"
            )
            notes.append(f"{input_name}: a scalar input, {given}")
            continue
        axis = moved.get(input_name, 0)
        spec = Input(spec_shape(input_name, raw[input_name], dims, used_dims, renamed, axis), dtype, batch_axis=axis)
        kind = token_kind(input_name, dtype)
        if kind != "values" and len(spec.shape) >= 2:
            spec.kind = kind
            if kind != "attention_mask":
                bound, how = _vocabulary(input_name, kind, vocabularies, config_vocab, vocab)
                if bound is None:
                    raise AddError(
                        f"{path}: input {input_name!r} holds token ids, and neither the graph (an embedding it "
                        "indexes) nor a config.json beside the file says how many: pass --vocab N"
                    )
                spec.high = bound
                notes.append(f"{input_name}: {kind}, ids in [0, {bound}) ({how})")
            else:
                notes.append(f"{input_name}: attention_mask (its name and integer dtype)")
        inputs[input_name] = spec
    notes += axes_notes(path, dims, used_dims, renamed)
    first = next((spec for spec in inputs.values() if spec.shape), None)
    if first and isinstance(first.shape[first.batch_axis], int):
        notes.append(f"batch fixed to {first.shape[0]} by the file: run at that batch")
    quantized = sorted({node.op_type for node in model.graph.node} & onnx_files.QUANTIZED_OPS)
    if quantized:
        notes.append(
            f"already quantized ({', '.join(quantized)} in the graph): the INT8 variants quantize it again, and "
            "its own figures are the FP32 reference's"
        )
    entry = Entry("onnx", file=path.name, inputs=inputs, dims=used_dims, output_rows=dict(flags.output_rows) or None)
    if operators := onnx_ml_operators(model):
        entry.onnx_ml = True
        notes.append(f"ONNX-ML operators ({', '.join(operators)}): ONNX Runtime runs them; the variants that "
                     "cannot (OpenVINO, FP16, INT8) get no stage")  # fmt: skip
    if zipmaps:
        entry.task = "classification"
        notes.append(f"output {zipmaps[0]!r} is a ZipMap of class probabilities: read as a tensor [batch, classes], "
                     "first (task: classification)")  # fmt: skip
    elif softmax := softmax_output(model):
        entry.task = "classification"
        notes.append(f"output {softmax!r} comes from a softmax: class scores (task: classification), judged by "
                     "top-1 agreement, not as an embedding")  # fmt: skip
    for output in sigmoid_outputs(model):
        notes.append(f"output {output!r} comes from a sigmoid: probabilities")
    files = {f.name: f for f in [path, *onnx_files.external_files(path)]}
    return Inferred(entry, files, list(files), notes, output_names=outputs)


def batch_axes_of(path: Path, raw: dict[str, list[Any]], flags: dict[str, int]) -> tuple[dict[str, int], list[str]]:
    """The inputs whose batch axis is not the first (a recurrent state [layers, batch, hidden]) and what
    says so: `--batch-axis`, else, where the other inputs' first axis is open and this one's is fixed,
    the axis the file names with their batch symbol, else its one open axis. A fixed-batch model
    (every first axis fixed) keeps its batch first."""

    def fixed(axis: Any) -> bool:
        return isinstance(axis, int) and axis > 0

    if unknown := sorted(set(flags) - {name for name, axes in raw.items() if axes}):
        raise AddError(f"{path}: --batch-axis {', '.join(unknown)}: no such input with axes (inputs: {sorted(raw)})")
    leaders = [(name, axes[0]) for name, axes in raw.items() if axes and not fixed(axes[0])]
    symbol = next((axis for _, axis in leaders if isinstance(axis, str) and symbol_of(axis)), None)
    found, notes = {}, []
    for name, axes in raw.items():
        if name in flags:
            if not 0 <= flags[name] < len(axes):
                raise AddError(f"{path}: --batch-axis {name}={flags[name]}: the input has {len(axes)} axes")
            found[name] = flags[name]
            notes.append(f"{name}: batch axis {flags[name]} (--batch-axis)")
            continue
        if not leaders or not axes or not fixed(axes[0]):
            continue
        named = [k for k, axis in enumerate(axes) if symbol is not None and axis == symbol]
        unnamed = [k for k, axis in enumerate(axes) if not fixed(axis)]
        if named:
            found[name] = named[0]
            notes.append(f"{name}: batch axis {named[0]} (the file names it {symbol!r}, as {leaders[0][0]}'s first)")
        elif len(unnamed) == 1:
            found[name] = unnamed[0]
            notes.append(f"{name}: batch axis {unnamed[0]} (its one open axis; {leaders[0][0]}'s batch is open)")
        else:
            raise AddError(
                f"{path}: input {name!r} fixes its first axis ({axes[0]}) where {leaders[0][0]}'s batch is open, "
                f"and the file does not say which of its axes is the batch: pass --batch-axis {name}=K"
            )
    return {name: axis for name, axis in found.items() if axis}, notes


PASS_THROUGH = {"Identity", "Flatten", "Reshape", "Squeeze", "Unsqueeze", "Expand"}  # keep a softmax's rows as they are


def origins(model: Any, through: set[str]) -> Callable[[str], Any]:
    """The node that computes a tensor, looking past `through` operators (reshapes: they keep its values)."""
    producer = {out: node for node in model.graph.node for out in node.output}

    def origin(name: str) -> Any:
        node = producer.get(name)
        while node is not None and node.op_type in through:
            node = producer.get(node.input[0])
        return node

    return origin


def softmax_output(model: Any) -> str | None:
    """The first output's name when a softmax computes it (through reshapes): a Softmax node, or one
    written out as Div(Exp(x), ReduceSum(Exp(x))) as jax2tf exports it; the file's answer is class
    probabilities, whatever the task it was trained for; None otherwise (logits, embeddings). The
    bench also recognises probabilities by their values (pipeline.core.decisions.class_axis)."""
    origin = origins(model, PASS_THROUGH)
    name = model.graph.output[0].name if model.graph.output else None
    node = origin(name) if name else None
    if node is not None and node.op_type == "Div" and len(node.input) == 2:
        exp, total = origin(node.input[0]), origin(node.input[1])
        if exp is not None and exp.op_type == "Exp" and total is not None and total.op_type == "ReduceSum":
            summed = origin(total.input[0])
            return name if summed is exp else None
    return name if node is not None and node.op_type in ("Softmax", "LogSoftmax") else None


def sigmoid_outputs(model: Any) -> list[str]:
    """The outputs a Sigmoid computes (through reshapes and transposes): independent probabilities, read at a
    threshold. The bench judges by the values too (pipeline.core.readings.detect); this is what `add`
    can tell the user before anything runs."""
    origin = origins(model, PASS_THROUGH | {"Transpose"})
    return [o.name for o in model.graph.output if (node := origin(o.name)) is not None and node.op_type == "Sigmoid"]


def embedding_rows(model: Any) -> dict[str, int]:
    """Graph input -> rows of the initializer table a Gather indexes with it (directly or through a
    Cast/Unsqueeze/Reshape): the vocabulary an id must stay under."""
    tables = {t.name: list(t.dims) for t in model.graph.initializer}
    origin: dict[str, str] = {i.name: i.name for i in model.graph.input}
    rows: dict[str, int] = {}
    for node in model.graph.node:  # nodes are topologically sorted in a valid graph
        if node.op_type in {"Cast", "Unsqueeze", "Reshape", "Squeeze", "Identity"} and node.input[0] in origin:
            origin[node.output[0]] = origin[node.input[0]]
        if node.op_type == "Gather" and len(node.input) > 1 and node.input[1] in origin and node.input[0] in tables:
            table = tables[node.input[0]]
            if table:
                rows[origin[node.input[1]]] = max(rows.get(origin[node.input[1]], 0), int(table[0]))
    return rows


def _vocabulary(
    name: str, kind: str, graph: dict[str, int], config: dict[str, Any], flag: int | None
) -> tuple[int | None, str]:
    if flag is not None and kind == "token_ids":
        return flag, "--vocab"
    if name in graph:
        return graph[name], "the rows of the embedding table it indexes"
    key = "vocab_size" if kind == "token_ids" else "type_vocab_size"
    if isinstance(config.get(key), int):
        return config[key], f"config.json's {key}"
    return None, ""


def _config_beside(path: Path) -> dict[str, Any]:
    try:
        return json.loads((path.parent / "config.json").read_text())
    except (OSError, ValueError):
        return {}
