"""OpenVINO: conversion, NNCF quantization settings and the runtime adapter, on the tiny model."""

from __future__ import annotations

import numpy as np
import openvino as ov
import pytest

from pipeline import layout, runtimes
from pipeline.data import DataSet
from pipeline.errors import ConfigError, PipelineError
from pipeline.passes.openvino import Validation
from pipeline.variants import validate_variant_params
from tests.conftest import build, tiny_config


def reference_outputs(ctx) -> tuple[np.ndarray, np.ndarray]:
    data = DataSet.load(ctx.source_dir / layout.REFERENCE)
    return data.inputs["x"], data.outputs["output"]


def bin_size(ctx, result) -> int:
    return (ctx.out_dir / result.entry).with_suffix(".bin").stat().st_size


def test_fp32_ir_is_close_to_the_export_and_pins_f32(context):
    result = build(context, "openvino_fp32")
    assert result.entry == "model.xml" and result.runtime_config == {"inference_precision": "f32"}
    assert result.details["compress_to_fp16"] is False and result.details["fake_quantize_ops"] == 0
    session = runtimes.load("openvino", context.out_dir / result.entry, 1, result.runtime_config)
    x, expected = reference_outputs(context)
    np.testing.assert_allclose(session.run({"x": x})["output"], expected, atol=1e-5)
    assert session.details()["inference_precision"] == "f32"


def test_fp16_ir_halves_the_weights(context, tmp_path):
    fp32 = build(context, "openvino_fp32")
    size32 = bin_size(context, fp32)
    fp16 = build(context, "openvino_fp16")
    assert bin_size(context, fp16) < 0.6 * size32
    assert fp16.runtime_config == {"inference_precision": "auto"}


def test_source_frontend_matches_the_onnx_frontend(tiny_project, context):
    result = build(context, "openvino_fp32", frontend="source")
    session = runtimes.load("openvino", context.out_dir / result.entry, 1, result.runtime_config)
    assert session.input_names == ["x"] and session.output_names == ["output"]
    x, expected = reference_outputs(context)
    np.testing.assert_allclose(session.run({"x": x})["output"], expected, atol=1e-5)


def test_nncf_int8_inserts_fake_quantize(context):
    result = build(context, "openvino_int8", subset_size=16, preset="mixed")
    assert result.details["fake_quantize_ops"] > 0
    assert result.details["subset_size"] == 16 and result.details["preset"] == "mixed"
    model = ov.Core().read_model(context.out_dir / result.entry)
    assert any(op.get_type_name() == "FakeQuantize" for op in model.get_ops())


def test_accuracy_control_records_what_it_reverted(context):
    result = build(context, "openvino_int8_acc", max_drop=0.05, subset_size=16)
    details = result.details
    assert details["validation_metric"] == "accuracy" and details["validation_samples"] == 64
    assert details["reverted_operations"] >= 0 and details["reached_max_drop"] in (True, False)
    assert details["validation_fp32"] - details["validation_int8"] <= 0.05 or not details["reached_max_drop"]


def test_validation_needs_a_classification_output(context):
    validation = Validation(context)
    assert validation.metric == "accuracy" and len(validation.items) == 64
    regression = type(context)("tiny", tiny_config(metric="none"), context.root, context.out_dir)
    assert Validation(regression).metric == "fidelity"  # three outputs: argmax agreement still works


def test_validation_refuses_a_lone_regression_output(context, monkeypatch):
    one_output = DataSet.load(context.source_dir / layout.REFERENCE)
    one_output.outputs = {"output": one_output.outputs["output"][:, :1]}
    one_output.save(context.source_dir / layout.REFERENCE)
    ctx = type(context)("tiny", tiny_config(metric="none"), context.root, context.out_dir)
    with pytest.raises(PipelineError, match="accuracy control needs a classification output"):
        Validation(ctx)


def test_openvino_params_are_validated():
    with pytest.raises(ConfigError, match=r"variants\.openvino_int8\.preset: Input should be"):
        validate_variant_params("openvino_int8", {"preset": "fast"})
    with pytest.raises(ConfigError, match=r"variants\.openvino_fp32\.inference_precision"):
        validate_variant_params("openvino_fp32", {"inference_precision": "fp64"})
    assert validate_variant_params("openvino_fp32", {}).inference_precision == "f32"
    assert validate_variant_params("openvino_int8_acc", {}).max_drop == 0.01


def test_adapter_measures_async_throughput_and_cached_load(context):
    result = build(context, "openvino_fp16")
    session = runtimes.load("openvino", context.out_dir / result.entry, 1, result.runtime_config)
    x, _ = reference_outputs(context)
    assert session.throughput({"x": x[:4]}, batch=4, seconds=0.05) > 0
    concurrency = session.concurrency()
    assert concurrency["streams"] >= 1 and concurrency["requests"] >= 1
    assert session.cached_load_ms() > 0
    session.prepare({"x": x[:1]})()
    assert session.details()["inference_precision"] in {"f32", "bf16", "f16"}
