"""Each pass on the tiny model's real export: a runnable artifact and honest build facts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from pipeline.core.data import generate_inputs
from pipeline.optimize.passes.onnxruntime.quantize_recipe import resolve_reduce_range
from tests.conftest import build, tiny_config, torch_build_context


def run_model(path: Path) -> np.ndarray:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": generate_inputs(tiny_config().inputs, 8, seed=5)["x"]})[0]


@pytest.mark.parametrize("name", ["onnx_fp32", "onnx_opt", "onnx_fp16", "onnx_int8_dynamic", "onnx_int8_static"])
def test_onnx_passes_produce_close_runnable_models(context, name):
    result = build(context, name)
    artifact = context.out_dir / result.entry
    reference = run_model(context.exported_onnx)
    output = run_model(artifact)
    assert output.shape == reference.shape and output.dtype == np.float32  # FP32 I/O kept by every variant
    assert np.abs(output - reference).max() < 0.1
    assert sorted(p.name for p in context.out_dir.iterdir()) == [result.entry]  # no scratch files left


def test_onnx_opt_records_node_counts(context):
    details = build(context, "onnx_opt", level="extended", slim=True).details
    assert details["nodes_before"] >= details["nodes_after"] > 0
    assert details["slim"] in {"applied", "no gain, not used"}


def test_fp16_stores_half_weights(context):
    result = build(context, "onnx_fp16")
    model = onnx.load(str(context.out_dir / result.entry))
    assert {i.data_type for i in model.graph.initializer} == {onnx.TensorProto.FLOAT16}
    assert result.details["cast_nodes"] >= 2  # FP32 in, FP32 out


def test_static_int8_is_qdq_and_records_calibration(context):
    result = build(context, "onnx_int8_static", calibration_samples=16, calibration_method="minmax")
    ops = {n.op_type for n in onnx.load(str(context.out_dir / result.entry)).graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= ops
    assert result.details["calibration_samples"] == 16 and result.details["format"] == "qdq"
    assert result.details["reduce_range"] == resolve_reduce_range("auto")


def test_preprocessing_falls_back_and_says_so(context, monkeypatch):
    """ORT's symbolic shape inference fails on some exporters' graphs: retry without it, and record it."""
    import onnxruntime.quantization.shape_inference as shape_inference

    real = shape_inference.quant_pre_process

    def fussy(model, output, skip_symbolic_shape=False, **kwargs):
        if not skip_symbolic_shape:
            raise TypeError("'NoneType' object is not iterable")
        return real(model, output, skip_symbolic_shape=True, **kwargs)

    monkeypatch.setattr(shape_inference, "quant_pre_process", fussy)
    result = build(context, "onnx_int8_dynamic")
    assert result.details["preprocess"].startswith("without symbolic shape inference (it failed: TypeError")

    def broken(*args, **kwargs):
        raise ValueError("x")

    monkeypatch.setattr(shape_inference, "quant_pre_process", broken)
    assert build(context, "onnx_int8_dynamic").details["preprocess"] == "skipped (it failed: ValueError: x)"
    assert build(context, "onnx_int8_static", preprocess=False).details["preprocess"] == "off"


def test_reduce_range_auto_follows_vnni(monkeypatch):
    import pipeline.optimize.passes.onnxruntime.quantize_recipe as quantize

    monkeypatch.setattr(quantize, "has_vnni", lambda: False)
    assert quantize.resolve_reduce_range("auto") is True
    monkeypatch.setattr(quantize, "has_vnni", lambda: True)
    assert quantize.resolve_reduce_range("auto") is False
    assert quantize.resolve_reduce_range(True) is True


def test_torch_eager_packages_weights_and_factory(tiny_project):
    from pipeline.optimize.passes.pytorch import ENTRY, TorchEager
    from pipeline.runtimes import load

    ctx = torch_build_context(tiny_project, ("logits",))
    out = ctx.out_dir
    result = TorchEager().run(ctx, None)
    assert result.entry == ENTRY
    session = load("torch", out / ENTRY, threads=1)
    outputs = session.run({"x": np.zeros((2, 12), np.float32)})
    assert list(outputs) == ["logits"] and outputs["logits"].shape == (2, 3)
    assert session.prepare({"x": np.zeros((1, 12), np.float32)})().shape == (1, 3)


def test_static_int8_lifts_an_old_opset_for_per_channel_weights(tmp_path):
    """An opset-9 file from elsewhere (the foreign ResNet-50): ORT's quantizer lifts it only to opset 11,
    where a per-channel DequantizeLinear (its `axis`) does not load; the pass lifts it to 13 first."""
    from types import SimpleNamespace

    from onnx import TensorProto, helper, numpy_helper
    from onnxruntime.quantization import QuantFormat, quantize_static

    from pipeline.optimize.passes.onnxruntime.quantize_recipe import without_value_info
    from pipeline.optimize.passes.onnxruntime.quantize_static import CalibrationReader

    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
        "old",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in (("x", [1, 3, 8, 8]), ("w", [4, 3, 3, 3]))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])],
        [weight],
    )
    old = tmp_path / "old.onnx"  # IR 3, as its exporter wrote it: the weight is also a graph input
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)], ir_version=3), old)
    rows = {"x": rng.standard_normal((8, 3, 8, 8)).astype(np.float32)}

    def quantized(model: str, name: str) -> Path:
        out = tmp_path / name
        quantize_static(model, str(out), CalibrationReader(rows, 1), quant_format=QuantFormat.QDQ, per_channel=True)
        return out

    with pytest.raises(Exception, match="axis"):  # why the lift exists: ORT's own output does not load
        ort.InferenceSession(str(quantized(str(old), "direct.onnx")), providers=["CPUExecutionProvider"])
    lifted = without_value_info(SimpleNamespace(out_dir=tmp_path, exported_onnx=old), old)
    assert onnx.load(lifted).opset_import[0].version == 13
    session = ort.InferenceSession(str(quantized(lifted, "lifted.onnx")), providers=["CPUExecutionProvider"])
    assert session.run(None, {"x": rows["x"][:1]})[0].shape == (1, 4, 8, 8)


def test_blockwise_int8_knobs_are_checked_and_a_graph_without_matmuls_does_not_apply(context):
    """block_size must be a power of 2; a Gemm-only graph (the tiny MLP's torch export) has nothing
    MatMulNBits rewrites, recorded as not applicable rather than built as a copy."""
    from pipeline.core.errors import ConfigError, NotApplicable
    from pipeline.optimize.knobs import validate_variant_params

    with pytest.raises(ConfigError, match=r"variants\.onnx_int8_blockwise\.block_size: 100 is not a power of 2"):
        validate_variant_params("onnx_int8_blockwise", {"block_size": 100})
    with pytest.raises(NotApplicable, match=r"no MatMul with constant 2-D weights .*Gemm stay float"):
        build(context, "onnx_int8_blockwise", block_size=16)


def _graph(tmp_path: Path, nodes: list, weights: dict[str, tuple[int, ...]]) -> Path:
    from onnx import TensorProto, helper, numpy_helper

    initializers = [numpy_helper.from_array(np.ones(s, np.float32), n) for n, s in weights.items()]
    x, y = (helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("x", "y"))
    path = tmp_path / "graph.onnx"
    onnx.save(helper.make_model(helper.make_graph(nodes, "g", [x], [y], initializers)), path)
    return path


def test_dynamic_int8_with_nothing_to_quantize_is_not_applicable(context, tmp_path):
    """ORT's dynamic quantizer rewrites a Gemm as MatMul + Add (alpha = beta = 1, A not transposed) and
    quantizes that; a graph with nothing it rewrites (jax2onnx's Gemm with beta 0, a Conv left out of
    op_types) would come out as the float model under an INT8 name."""
    from onnx import helper

    from pipeline.core.errors import NotApplicable
    from pipeline.optimize.passes.onnxruntime.quantize_dynamic import dynamic_ops, quantizable_nodes

    result = build(context, "onnx_int8_dynamic")  # the tiny MLP: its layers are quantized
    assert result.details["op_types"] is None and "MatMulInteger" in result.details["top_ops"]
    conv = helper.make_node("Conv", ["x", "w"], ["h"])
    weights = {"w": (4, 3, 3, 3), "v": (2, 4)}
    gemm = _graph(tmp_path, [conv, helper.make_node("Gemm", ["h", "v"], ["y"], transB=1)], weights)
    assert quantizable_nodes(gemm, dynamic_ops()) == 2 and quantizable_nodes(gemm, ["MatMul"]) == 1
    jax_head = _graph(tmp_path, [conv, helper.make_node("Gemm", ["h", "v"], ["y"], beta=0.0)], weights)
    assert quantizable_nodes(jax_head, ["MatMul"]) == 0 and quantizable_nodes(jax_head, ["Conv"]) == 1
    context.exported_onnx.write_bytes(jax_head.read_bytes())
    with pytest.raises(NotApplicable, match=r"nothing to quantize dynamically: no MatMul \(a Gemm counts as MatMul\)"):
        build(context, "onnx_int8_dynamic", op_types=["MatMul"])
