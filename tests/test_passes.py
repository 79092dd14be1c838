"""Each pass on the tiny model's real export: a runnable artifact and honest build facts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from pipeline.build.passes.ort_quantize import resolve_reduce_range
from pipeline.core.data import generate_inputs
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
    import pipeline.build.passes.ort_quantize as quantize

    monkeypatch.setattr(quantize, "has_vnni", lambda: False)
    assert quantize.resolve_reduce_range("auto") is True
    monkeypatch.setattr(quantize, "has_vnni", lambda: True)
    assert quantize.resolve_reduce_range("auto") is False
    assert quantize.resolve_reduce_range(True) is True


def test_torch_eager_packages_weights_and_factory(tiny_project):
    from pipeline.build.passes.pytorch import ENTRY, TorchEager
    from pipeline.runtimes import load

    ctx = torch_build_context(tiny_project, ("logits",))
    out = ctx.out_dir
    result = TorchEager().run(ctx, None)
    assert result.entry == ENTRY
    session = load("torch", out / ENTRY, threads=1)
    outputs = session.run({"x": np.zeros((2, 12), np.float32)})
    assert list(outputs) == ["logits"] and outputs["logits"].shape == (2, 3)
    assert session.prepare({"x": np.zeros((1, 12), np.float32)})().shape == (1, 3)
