"""The work a graph defines: multiply-accumulates and the bytes its activations take, read from ONNX
shape inference (or one run) with every input at a concrete shape. The family rule (how much of the
work is Conv) and the roofline (how far a variant is from this machine's limit) both count with it.

Only the dense products count (MatMul, Gemm, Conv, ConvTranspose and their integer forms, and the
input and recurrent products of LSTM, GRU and RNN at each step): what the roofs are measured with.
Elementwise and normalisation work is small beside them in the models this pipeline takes, and a graph
whose sizes neither inference nor a run can tell counts nothing (None), never a guess.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.core import onnx_files

DENSE = {"MatMul", "Gemm", "MatMulInteger", "QLinearMatMul"}
CONVOLUTION = {"Conv", "ConvInteger", "QLinearConv", "ConvTranspose"}
RECURRENT = {"LSTM": 4, "GRU": 3, "RNN": 1}  # gates: W is [directions, gates x hidden, input]
# where the two operands sit in a node's inputs (QLinear ops carry scales and zero points between them)
OPERANDS = {"QLinearMatMul": (0, 3), "QLinearConv": (0, 3)}


@dataclass(frozen=True)
class Work:
    """One inference at the shapes counted: multiply-accumulates by operator type, and the elements of
    every tensor a node writes (each is written once and read at least once: the activation traffic)."""

    macs_by_op: dict[str, int] = field(default_factory=dict)
    activation_elements: int = 0

    @property
    def macs(self) -> int:
        return sum(self.macs_by_op.values())

    @property
    def conv_macs(self) -> int:
        return sum(n for op, n in self.macs_by_op.items() if op in CONVOLUTION)


def count_work(model: Any, shapes: dict[str, tuple[int, ...]]) -> Work | None:
    """The work of `model` (an onnx.ModelProto, left untouched) with each input at its shape in `shapes`;
    None when neither ONNX's shape inference, nor ONNX Runtime's symbolic one (which follows the Shape /
    Slice / Concat chains exporters write, e.g. a BERT's position ids), nor one run of the graph on zeros
    can size every dense product."""
    import onnx

    model = onnx.ModelProto.FromString(model.SerializeToString())  # the caller's graph keeps its symbols
    for value in model.graph.input:
        if value.name in shapes:
            for dim, size in zip(value.type.tensor_type.shape.dim, shapes[value.name], strict=False):
                dim.Clear()
                dim.dim_value = int(size)
    for infer in (_onnx_inference, _symbolic_inference, _shapes_by_running):
        try:
            inferred = infer(model)
        except Exception:  # a graph this inference rejects: the next one, else nothing
            continue
        if (work := _count(inferred)) is not None:
            return work
    return None


def _onnx_inference(model: Any) -> Any:
    import onnx

    return onnx.shape_inference.infer_shapes(model, data_prop=True)


def _symbolic_inference(model: Any) -> Any:
    return _symbolic_shape_inference().infer_shapes(model, auto_merge=True)


@functools.cache
def _symbolic_shape_inference() -> Any:
    """ONNX Runtime's SymbolicShapeInference, its module loaded from its file: an import of
    onnxruntime.tools.symbolic_shape_infer first runs the package's __init__, which imports torch (1.3 s
    of every select stage counting a transformer) for an export helper this never calls."""
    import importlib.util
    import sys

    name = "onnxruntime.tools.symbolic_shape_infer"
    if name in sys.modules:
        return sys.modules[name].SymbolicShapeInference
    ort = importlib.util.find_spec("onnxruntime")
    path = Path(ort.origin).parent / "tools" / "symbolic_shape_infer.py"  # type: ignore[union-attr, arg-type]
    spec = importlib.util.spec_from_file_location("pipeline_ort_symbolic_shape_infer", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module.SymbolicShapeInference


def _shapes_by_running(model: Any) -> Any:
    """The graph with every node output's shape as one ONNX Runtime run on zeros at the inputs' shapes
    finds it: exact where the graph's own shape arithmetic defeats both inferences (paddle2onnx's Shape
    cast to int32 and back, then a Concat on axis -1). Raises where a weight is external or an input
    has no size."""
    import onnx
    import onnxruntime as ort
    from onnx import helper

    probe = onnx.ModelProto.FromString(model.SerializeToString())
    named = {value.name for value in probe.graph.output}
    for node in probe.graph.node:
        if node.op_type != "Constant":
            probe.graph.output.extend(onnx.ValueInfoProto(name=o) for o in node.output if o and o not in named)
    options = onnx_files.session_options()
    options.intra_op_num_threads, options.log_severity_level = 1, 3
    session = ort.InferenceSession(probe.SerializeToString(), options, providers=["CPUExecutionProvider"])
    declared = {value.name: value.type.tensor_type for value in probe.graph.input}
    feeds = {}
    for fed in session.get_inputs():
        tensor = declared[fed.name]
        if not all(dim.HasField("dim_value") for dim in tensor.shape.dim):  # never run at a guessed size
            raise ValueError(f"input {fed.name} has no size")
        shape = [dim.dim_value for dim in tensor.shape.dim]
        feeds[fed.name] = np.zeros(shape, helper.tensor_dtype_to_np_dtype(tensor.elem_type))
    names = [o.name for o in session.get_outputs()]
    for name, array in zip(names, session.run(names, feeds), strict=True):
        if isinstance(array, np.ndarray):
            dtype = helper.np_dtype_to_tensor_dtype(array.dtype)
            probe.graph.value_info.append(helper.make_tensor_value_info(name, dtype, list(array.shape)))
    return probe


def _count(inferred: Any) -> Work | None:
    known: dict[str, list[int]] = {t.name: list(t.dims) for t in inferred.graph.initializer}
    for node in inferred.graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].HasField("t"):
            known[node.output[0]] = list(node.attribute[0].t.dims)
    for value in [*inferred.graph.value_info, *inferred.graph.input, *inferred.graph.output]:
        dims = value.type.tensor_type.shape.dim
        if dims and all(d.HasField("dim_value") for d in dims):
            known[value.name] = [d.dim_value for d in dims]
    macs: dict[str, int] = {}
    for node in inferred.graph.node:
        if node.op_type not in DENSE | CONVOLUTION | RECURRENT.keys():
            continue
        first, second = OPERANDS.get(node.op_type, (0, 1))
        out, a, b = known.get(node.output[0]), known.get(node.input[first]), known.get(node.input[second])
        if a is None or b is None or (out is None and node.op_type not in RECURRENT):  # Y may be left unnamed
            return None
        macs[node.op_type] = macs.get(node.op_type, 0) + _macs(node, out, a, b)
    constants = folded_constants(inferred.graph)
    written = {o for n in inferred.graph.node for o in n.output if o and o not in constants}
    activations = sum(int(np.prod(known[name])) for name in written if name in known)
    return Work(macs_by_op=macs, activation_elements=activations)


def folded_constants(graph: Any) -> set[str]:
    """Every tensor a runtime computes once at load, not per call: initializers, Constant nodes, and the outputs
    of nodes whose every input is such a tensor (a Dequantize or Cast of FP16 weights, as tf2onnx writes for a
    float16 `.tflite`: counted as activations, they put BirdNET's range model at 167% of its memory bound)."""
    constants = {t.name for t in graph.initializer}
    for node in graph.node:  # ONNX keeps nodes in topological order
        inputs = [name for name in node.input if name]
        if node.op_type == "Constant" or (inputs and all(name in constants for name in inputs)):
            constants.update(name for name in node.output if name)
    return constants


def _macs(node: Any, out: list[int] | None, a: list[int], b: list[int]) -> int:
    """One node's multiply-accumulates: each output value costs the contracted length."""
    if node.op_type in RECURRENT:  # X [seq, batch, input] (layout 1: batch first), W as above; out: Y
        directions, gated, inputs = b
        steps = int(np.prod(a[:2]))  # seq x batch, whichever the layout
        return steps * directions * gated * (inputs + gated // RECURRENT[node.op_type])
    if node.op_type == "ConvTranspose":  # each input value meets C_out/group x kernel weights
        return int(np.prod(a)) * int(np.prod(b[1:]))
    assert out is not None  # _count sized every other product's output
    if node.op_type in CONVOLUTION:  # each output value: C_in/group x kernel
        return int(np.prod(out)) * int(np.prod(b[1:]))
    transposed = node.op_type == "Gemm" and any(x.name == "transA" and x.i for x in node.attribute)
    return int(np.prod(out)) * int(a[0] if transposed else a[-1])
