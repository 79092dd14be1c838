"""ONNX graphs at the shapes other exporters write, built with onnx.helper, for tests/test_e2e_add.py: a
stateful audio-like model (a scalar sample rate read by an `If`, a recurrent state whose batch axis is
second, axes with no names at all), a detector whose raw grid mixes box coordinates in the hundreds with
class scores (paddle2onnx's dotted axis names, its weights in Constant nodes), and a classifier whose
softmax is written out as Exp / ReduceSum / Div behind tf2onnx's `unk__N` batch axis. The real models they
stand for (silero-vad, a YOLOv8 export, magika) are benchmarks/foreign_models.py's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(0)


def weights(name: str, *shape: int) -> onnx.TensorProto:
    return numpy_helper.from_array((RNG.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32), name)


def save(graph: onnx.GraphProto, path: Path) -> Path:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # what those exporters write
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, path)
    return path


def unnamed(name: str, elem: int, shape: list[int | None]) -> onnx.ValueInfoProto:
    """An input or output whose open axes have neither a value nor a name (as spox writes them)."""
    value = helper.make_tensor_value_info(name, elem, [d if d else "x" for d in shape])
    for dim, size in zip(value.type.tensor_type.shape.dim, shape, strict=True):
        if not size:
            dim.Clear()
    return value


def stateful(folder: Path) -> tuple[Path, Path]:
    """x [?, 8], state [2, ?, 4] and a scalar sr -> y [?, 1] (scaled by an If on sr) and stateN [2, ?, 4]."""
    one = helper.make_graph([helper.make_node("Constant", [], ["s"], value_float=1.0)], "then", [],
                            [helper.make_tensor_value_info("s", TensorProto.FLOAT, [])])  # fmt: skip
    half = helper.make_graph([helper.make_node("Constant", [], ["s"], value_float=0.5)], "else", [],
                             [helper.make_tensor_value_info("s", TensorProto.FLOAT, [])])  # fmt: skip
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"]),
        helper.make_node("Mul", ["state", "decay"], ["kept"]),
        helper.make_node("Add", ["kept", "h"], ["mixed"]),
        helper.make_node("Tanh", ["mixed"], ["stateN"]),
        helper.make_node("ReduceMean", ["stateN"], ["pooled"], axes=[0], keepdims=0),
        helper.make_node("MatMul", ["pooled", "w2"], ["logit"]),
        helper.make_node("Equal", ["sr", "rate"], ["is_16k"]),
        helper.make_node("If", ["is_16k"], ["scale"], then_branch=one, else_branch=half),
        helper.make_node("Mul", ["logit", "scale"], ["scaled"]),
        helper.make_node("Sigmoid", ["scaled"], ["y"]),
    ]
    constants = [
        weights("w1", 8, 4),
        weights("w2", 4, 1),
        numpy_helper.from_array(np.array(0.5, np.float32), "decay"),
        numpy_helper.from_array(np.array(16000, np.int64), "rate"),
    ]
    inputs = [unnamed("x", TensorProto.FLOAT, [None, 8]), unnamed("state", TensorProto.FLOAT, [2, None, 4]),
              helper.make_tensor_value_info("sr", TensorProto.INT64, [])]  # fmt: skip
    outputs = [unnamed("y", TensorProto.FLOAT, [None, 1]), unnamed("stateN", TensorProto.FLOAT, [2, None, 4])]
    path = save(helper.make_graph(nodes, "stateful", inputs, outputs, constants), folder / "stateful.onnx")
    rows = 64
    np.savez(folder / "eval.npz", x=RNG.standard_normal((rows, 8)).astype(np.float32),
             state=RNG.standard_normal((2, rows, 4)).astype(np.float32), sr=np.array(16000))  # fmt: skip
    return path, folder / "eval.npz"


def grid(folder: Path) -> tuple[Path, Path]:
    """images [p2o.DynamicDimension.0, 3, ...1, ...2] -> output0 [batch, 4 + 2, H*W]: boxes in pixels (0-320)
    beside two class probabilities, a 1x1 Conv whose weight sits in a Constant node."""
    kernel = RNG.standard_normal((6, 3, 1, 1)).astype(np.float32)
    nodes = [
        helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(kernel, "k")),
        helper.make_node("Conv", ["images", "k"], ["c"]),
        helper.make_node("Shape", ["c"], ["c_shape"]),
        helper.make_node("Slice", ["c_shape", "zero", "two"], ["batch_channels"]),
        helper.make_node("Concat", ["batch_channels", "minus_one"], ["flat_shape"], axis=0),
        helper.make_node("Reshape", ["c", "flat_shape"], ["flat"]),
        helper.make_node("Split", ["flat", "four_two"], ["raw_boxes", "raw_scores"], axis=1),
        helper.make_node("Sigmoid", ["raw_boxes"], ["unit_boxes"]),
        helper.make_node("Mul", ["unit_boxes", "pixels"], ["boxes"]),
        helper.make_node("Sigmoid", ["raw_scores"], ["scores"]),
        helper.make_node("Concat", ["boxes", "scores"], ["output0"], axis=1),
    ]
    constants = [
        numpy_helper.from_array(np.array([0], np.int64), "zero"),
        numpy_helper.from_array(np.array([2], np.int64), "two"),
        numpy_helper.from_array(np.array([-1], np.int64), "minus_one"),
        numpy_helper.from_array(np.array([4, 2], np.int64), "four_two"),
        numpy_helper.from_array(np.array(320.0, np.float32), "pixels"),
    ]
    axes = ["p2o.DynamicDimension.0", 3, "p2o.DynamicDimension.1", "p2o.DynamicDimension.2"]
    images = helper.make_tensor_value_info("images", TensorProto.FLOAT, axes)
    output = helper.make_tensor_value_info("output0", TensorProto.FLOAT, ["p2o.DynamicDimension.0", 6, "anchors"])
    path = save(helper.make_graph(nodes, "grid", [images], [output], constants), folder / "grid.onnx")
    np.savez(folder / "eval.npz", images=RNG.standard_normal((48, 3, 8, 12)).astype(np.float32))
    return path, folder / "eval.npz"


def written_out_softmax(logits: str, output: str, axes: str) -> list[onnx.NodeProto]:
    """A softmax over axis 1 as jax2tf writes it: Exp(x - max) / ReduceSum(Exp(...)), the sum broadcast
    back by an Expand (tf2onnx's BroadcastTo); `axes`: the int64 [1] initializer ReduceSum reads."""
    return [
        helper.make_node("ReduceMax", [logits], ["top"], axes=[1], keepdims=1),
        helper.make_node("Sub", [logits, "top"], ["shifted"]),
        helper.make_node("Exp", ["shifted"], ["e"]),
        helper.make_node("ReduceSum", ["e", axes], ["total"], keepdims=1),
        helper.make_node("Shape", ["e"], ["e_shape"]),
        helper.make_node("Expand", ["total", "e_shape"], ["broadcast"]),
        helper.make_node("Div", ["e", "broadcast"], [output]),
    ]


def jaxlike(folder: Path) -> tuple[Path, Path]:
    """bytes int32 [unk__5, 16] -> probabilities [unk__5, 5], the softmax written out as jax2tf does."""
    nodes = [
        helper.make_node("Cast", ["bytes"], ["values"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["values", "inverse"], ["scaled"]),
        helper.make_node("MatMul", ["scaled", "w"], ["logits"]),
        *written_out_softmax("logits", "target_label", "one"),
    ]
    constants = [
        weights("w", 16, 5),
        numpy_helper.from_array(np.array(1 / 64, np.float32), "inverse"),
        numpy_helper.from_array(np.array([1], np.int64), "one"),
    ]
    bytes_in = helper.make_tensor_value_info("bytes", TensorProto.INT32, ["unk__5", 16])
    probabilities = helper.make_tensor_value_info("target_label", TensorProto.FLOAT, ["unk__5", 5])
    path = save(helper.make_graph(nodes, "jaxlike", [bytes_in], [probabilities], constants), folder / "jaxlike.onnx")
    np.savez(folder / "eval.npz", bytes=RNG.integers(0, 257, size=(64, 16), dtype=np.int32))
    return path, folder / "eval.npz"
