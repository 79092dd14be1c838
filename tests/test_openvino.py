"""OpenVINO: conversion, NNCF quantization settings and the runtime adapter, on the tiny model."""

from __future__ import annotations

import numpy as np
import openvino as ov
import pytest

from pipeline import runtimes
from pipeline.core import layout
from pipeline.core.data import DataSet
from pipeline.core.errors import ConfigError
from pipeline.measure.harness import measure_concurrent
from pipeline.optimize.knobs import validate_variant_params
from pipeline.optimize.passes.openvino.accuracy_search import SearchStopped, Validation
from tests.conftest import build, models_from, tiny_config


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
    assert build(context, "openvino_int8", subset_size=16).details["preset"] == "performance"  # auto, not a transformer
    result = build(context, "openvino_int8", subset_size=16, preset="mixed")
    assert result.details["fake_quantize_ops"] > 0
    assert result.details["subset_size"] == 16 and result.details["preset"] == "mixed"
    model = ov.Core().read_model(context.out_dir / result.entry)
    assert any(op.get_type_name() == "FakeQuantize" for op in model.get_ops())


def test_accuracy_control_tunes_on_validation_rows_and_records_what_it_reached(context):
    result = build(context, "openvino_int8_acc", max_drop=0.05, subset_size=16)
    details = result.details
    assert details["validation_metric"] == "the task metric accuracy" and details["validation_samples"] == 48
    assert details["validation_origin"] == "validation"  # never the scoring rows (reference.npz)
    drop = details["validation_fp32"] - details["validation_int8"]
    assert details["validation_drop"] == pytest.approx(drop)
    assert details["reached_max_drop"] == (drop <= 0.05)
    assert details["stopped_by"] == "nncf" and details["search_s"] < details["max_seconds"]
    assert details["model_type"] == "default"  # the tiny MLP has no attention


def test_accuracy_control_never_stops_before_the_quantized_model_is_validated(context):
    """A spent budget cannot cut the search short of its first answer: a model that meets max_drop
    at once is kept (stopping only happens once NNCF started reverting, when the held one does not)."""
    result = build(context, "openvino_int8_acc", max_drop=0.5, subset_size=16, max_seconds=1e-6)
    assert result.details["stopped_by"] == "nncf" and result.details["validation_drop"] <= 0.5


def answering(validation: Validation) -> Validation:
    """Each "model" answers its own value on every row."""
    validation.score = lambda outputs, where: outputs
    validation.run = lambda compiled, inputs, real: compiled
    validation.aggregate = lambda runs: runs[0][0]
    return validation


def test_a_spent_budget_stops_the_search_with_its_reason(context):
    validation = answering(Validation(context, max_seconds=1e-6))
    validation(compiled=1.0, items=validation.items[:1])  # NNCF's one-item probe
    validation(compiled=1.0, items=validation.items)  # FP32
    validation(compiled=0.8, items=validation.items)  # the quantized model: always validated
    with pytest.raises(SearchStopped):
        validation(compiled=0.85, items=validation.items)
    assert validation.stop_reason == "its budget: 0 s spent (max_seconds 1e-06 s)"


@pytest.mark.parametrize(("step", "budget"), [(2.0, 60.0), (30.0, 600.0)])
def test_the_budget_scales_with_the_first_step_within_max_seconds(context, monkeypatch, step, budget):
    """30 steps of the first one's seconds (the FP32 model compiled and validated on every row): 2 s a step gives
    60 s, not a fixed 600; a 30 s step would give 900 s, past the cap, so the cap holds and says so."""
    now = [0.0]
    monkeypatch.setattr("pipeline.optimize.passes.openvino.accuracy_search.time.monotonic", lambda: now[0])
    validation = answering(Validation(context, max_seconds=600, max_drop=0.01, steps=30))
    validation(compiled=1.0, items=validation.items[:1])  # NNCF's one-item probe: no step
    assert validation.max_seconds == 600
    now[0] = step
    validation(compiled=1.0, items=validation.items)  # FP32 on every row: the first step
    assert validation.max_seconds == budget
    assert ("30 steps of" if budget < 600 else "the cap: 30 steps of") in validation.budget_how


def test_accuracy_control_stops_once_its_pace_cannot_reach_max_drop(context, monkeypatch):
    """Reverting gains 0.0005 a second; 0.08 short with 70 s left: stop, not spend the budget."""
    now = [0.0]
    monkeypatch.setattr("pipeline.optimize.passes.openvino.accuracy_search.time.monotonic", lambda: now[0])
    validation = answering(Validation(context, max_seconds=100, max_drop=0.01))  # started at 0
    for seconds, value in ((0, 1.0), (10, 0.90), (20, 0.905), (30, 0.91)):  # FP32, quantized, two reverted
        validation(compiled=value, items=validation.items[:1])  # NNCF also validates item subsets: not counted
        now[0] = seconds
        validation(compiled=value, items=validation.items)
    assert validation.stop_reason is None
    now[0] = 31
    with pytest.raises(SearchStopped):
        validation(compiled=0.915, items=validation.items)
    assert validation.stop_reason.startswith("projected: ")


def test_accuracy_control_stops_when_ranking_alone_would_outlast_its_budget(context, monkeypatch):
    """63 groups to score at 8 s each with 100 s left: stop after two, not when the budget is gone;
    ranking scores are not progress (a lower one is no reason to stop)."""
    now = [0.0]
    monkeypatch.setattr("pipeline.optimize.passes.openvino.accuracy_search.time.monotonic", lambda: now[0])
    validation = answering(Validation(context, max_seconds=120, max_drop=0.01))
    for value in (1.0, 0.9):  # FP32, the quantized model
        validation(compiled=value, items=validation.items)
    now[0] = 20
    validation.ranking_started(63)
    for seconds, value in ((28, 0.95), (36, 0.91)):
        now[0] = seconds
        validation(compiled=value, items=validation.items)
    assert validation.stop_reason is None and len(validation.whole) == 2  # ranking calls are not reverts
    with pytest.raises(SearchStopped):
        validation(compiled=0.93, items=validation.items)
    assert validation.stop_reason.startswith("projected: ranking 63 groups of quantized operations needs about")


def test_a_model_with_many_groups_gets_the_budget_its_ranking_needs(context, monkeypatch):
    """63 groups scored at 12 s each, with seconds_per_group 12: the budget grows to 120 + 63 x 12 s when
    ranking starts (once), so the ranking goes on where the fixed 120 s stopped it."""
    now = [0.0]
    monkeypatch.setattr("pipeline.optimize.passes.openvino.accuracy_search.time.monotonic", lambda: now[0])
    validation = answering(Validation(context, max_seconds=120, max_drop=0.01, seconds_per_group=12))
    for value in (1.0, 0.9):
        validation(compiled=value, items=validation.items)
    now[0] = 20
    validation.ranking_started(63)
    validation.ranking_started(63)  # a second ranking earns nothing more
    assert validation.max_seconds == 120 + 63 * 12
    for seconds in (28, 36, 44):
        now[0] = seconds
        validation(compiled=0.95, items=validation.items)
    assert validation.stop_reason is None


def test_validation_without_a_task_metric_scores_every_output_by_its_decisions(context):
    """The tiny model's logits are plain values without a metric: judged by the worst row's cosine, over all
    the rows NNCF hands over (the aggregate is no mean of the items' figures)."""
    ctx = type(context)("tiny", tiny_config(metric="none"), context.root, context.out_dir)
    validation = Validation(ctx)
    assert validation.metric.startswith("the worst output's decision score")
    source = validation.goal.rows.outputs
    first = validation.items[0][1]
    one = {name: value[:1] for name, value in source.items()}
    assert validation.score(one, [first]) == pytest.approx(1.0)
    assert validation.score({name: -value for name, value in one.items()}, [first]) == pytest.approx(-1.0)
    answers = iter(
        [{name: -value for name, value in one.items()}]
        + [
            {name: value[start : start + real] for name, value in source.items()}
            for _, (start, real) in validation.items[1:]
        ]
    )
    validation.run = lambda compiled, inputs, real: next(answers)
    metric, values = validation(compiled=None, items=validation.items)
    assert metric == pytest.approx(-1.0) and np.mean(values) > metric


def test_ignored_scope_names_must_exist(context):
    with pytest.raises(ConfigError, match=r"ignored_scope\.names .*no_such_op not operations"):
        build(context, "openvino_int8", subset_size=16, ignored_scope={"names": ["no_such_op"]})


def test_openvino_params_are_validated():
    with pytest.raises(ConfigError, match=r"variants\.openvino_int8\.preset: Input should be"):
        validate_variant_params("openvino_int8", {"preset": "fast"})
    with pytest.raises(ConfigError, match=r"variants\.openvino_fp32\.inference_precision"):
        validate_variant_params("openvino_fp32", {"inference_precision": "fp64"})
    assert validate_variant_params("openvino_fp32", {}).inference_precision == "f32"
    assert validate_variant_params("openvino_int8_acc", {}).max_drop == 0.01


def test_adapter_offers_its_async_queue_and_a_cached_load(context):
    result = build(context, "openvino_fp16")
    session = runtimes.load("openvino", context.out_dir / result.entry, 1, result.runtime_config)
    x, _ = reference_outputs(context)
    queue = session.async_queue({"x": x[:4]}, requests=1, threads=1)  # the plugin's optimal number, not ours
    assert measure_concurrent(queue, 4, 0.05) > 0  # the timing loop is pipeline.measure's
    details = queue.details()
    assert details["streams"] >= 1 and details["requests"] >= 1 and "AsyncInferQueue" in details["how"]
    assert session.load_from_cache() is True


def test_each_prepared_call_keeps_its_own_inputs(context):
    result = build(context, "openvino_fp32")
    session = runtimes.load("openvino", context.out_dir / result.entry, 1, result.runtime_config)
    x, _ = reference_outputs(context)
    one = session.prepare({"x": x[:1]})
    session.prepare({"x": x[:8]})  # the sweep prepares bigger batches after the latency call
    assert next(iter(one().values())).shape[0] == 1


def test_accuracy_control_raises_the_users_own_metric_from_the_model_folder(context):
    """A user's metric in models/tiny/ (an error rate on the validation rows' labels, lower is better) is what
    NNCF's validation_fn reports, as 1 - it so that higher is better as NNCF assumes (and a perfect source is no
    zero NNCF divides by)."""
    import dataclasses

    folder = context.root / "models" / "tiny"
    folder.mkdir(parents=True, exist_ok=True)
    (context.root / "models" / "__init__.py").touch()
    (folder / "metric.py").write_text(
        "import numpy as np\n\n\ndef errors(outputs, labels):\n"
        "    return float(np.mean(outputs['output'].argmax(1) != labels['labels']))\n\n\n"
        "errors.higher_is_better = False\n"
    )
    ctx = dataclasses.replace(context, config=tiny_config(metric="models.tiny.metric:errors"))
    with models_from(context.root):
        validation = Validation(ctx)
        assert validation.metric == "the task metric models.tiny.metric:errors (1 - it: lower is better)"
        assert validation.goal.source_figure == 1.0  # the validation rows' labels are the source's own classes
        result = build(ctx, "openvino_int8_acc", subset_size=16, max_drop=0.5)
    details = result.details
    assert details["validation_metric"] == validation.metric and details["validation_fp32"] == 1.0
    assert 0.5 <= details["validation_int8"] <= 1.0
