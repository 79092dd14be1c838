"""Build and bench stage bookkeeping: skipped and failed variants are recorded, never raised."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from pipeline.core import layout, records
from pipeline.core import registry as variants
from pipeline.core.config import Params
from pipeline.core.errors import ConfigError
from pipeline.core.files import write_json
from pipeline.core.isolate import IsolatedFailure
from pipeline.core.records import Kind
from pipeline.core.records.env import Probe
from pipeline.measure.stage import benchmark_variant
from pipeline.optimize import applicability
from pipeline.optimize import stage as build_module
from pipeline.optimize.stage import build_variant
from tests.conftest import tiny_config
from tests.helpers import metric, write_source


def make_params(**catalog_overrides) -> Params:
    return Params.model_validate(
        {
            "models": ["tiny"],
            "catalog": {"tiny": tiny_config(**catalog_overrides).model_dump()},
            "variants": {"onnx_fp32": {}, "torch_eager": {}},
        }
    )


def test_skip_reasons():
    onnx_model = tiny_config(source="onnx", factory=None)
    skip = applicability.never_applies(variants.get("torch_eager"), "m", onnx_model, "cpu")
    assert skip.kind == Kind.NOT_APPLICABLE and "needs a torch source; m is a onnx model" in skip.reason
    skipping = tiny_config(skip=["onnx_fp32"])
    assert "catalog.m.skip" in applicability.never_applies(variants.get("onnx_fp32"), "m", skipping, "cpu").reason
    no_gpu_target = applicability.never_applies(variants.get("onnx_cuda_fp32"), "m", tiny_config(), None)
    assert no_gpu_target.kind == Kind.NOT_APPLICABLE  # params.yaml's targets rule it out: no stages
    no_gpu_here = applicability.unavailable(
        variants.get("onnx_cuda_fp32"), "cuda:0", Probe(available=False, reason="not probed (reports/env.json)")
    )
    assert no_gpu_here.kind == Kind.UNAVAILABLE and "target cuda:0 is not usable here" in no_gpu_here.reason
    assert applicability.never_applies(variants.get("onnx_fp32"), "m", tiny_config(), "cpu") is None
    assert applicability.unavailable(variants.get("onnx_fp32"), "cpu", Probe(available=True)) is None


def test_skipped_variant_is_recorded_then_benchmarked_as_skipped(stage_project, machine):
    params = make_params(source="onnx", factory=None)
    info = build_variant("tiny", "torch_eager", params, stage_project)
    assert info.status == "skipped"
    folder = layout.variant_dir("tiny", "torch_eager", stage_project)
    assert [p.name for p in folder.iterdir()] == [layout.BUILD_INFO]
    record = benchmark_variant("tiny", "torch_eager", params, stage_project)
    saved = json.loads(layout.details_file("tiny", "torch_eager", stage_project).read_text())
    assert saved == record.model_dump(mode="json", exclude_unset=True)
    assert record.kind == Kind.NOT_APPLICABLE
    assert saved["status"] == "skipped" and "needs a torch source" in saved["reason"]
    assert saved["runtime"] == "torch" and "latency_ms" not in saved
    tracked = json.loads(layout.metrics_file("tiny", "torch_eager", stage_project).read_text())
    assert tracked == {"status": "skipped"}  # no text in what DVC tracks: the reason is in the details


def test_failed_build_leaves_only_its_record(stage_project, machine, monkeypatch):
    def failing_call(target, kwargs, timeout, env=None, log=None):
        (Path(kwargs["out_dir"]) / "half_written.onnx").write_bytes(b"...")
        raise IsolatedFailure("RuntimeError: converter exploded")

    monkeypatch.setattr(build_module, "call", failing_call)
    info = build_variant("tiny", "onnx_fp32", make_params(), stage_project)
    assert info.status == "failed" and info.reason == (
        "build failed: RuntimeError: converter exploded [reproduce: python stages/build.py tiny onnx_fp32]"
    )
    folder = layout.variant_dir("tiny", "onnx_fp32", stage_project)
    assert [p.name for p in folder.iterdir()] == [layout.BUILD_INFO]
    record = benchmark_variant("tiny", "onnx_fp32", make_params(), stage_project)
    assert record.kind == Kind.FAILED and "converter exploded" in record.reason


def test_the_build_stage_checks_its_variants_knobs_before_building(stage_project, monkeypatch):
    """params.yaml is read without the passes (pipeline.core.config): the build stage checks the
    knobs of the variant it builds, its model's overrides included, and stops with one line."""
    monkeypatch.setattr(build_module, "call", lambda *a, **k: pytest.fail("built with a misspelt knob"))
    params = Params.model_validate(make_params().model_dump() | {"variants": {"onnx_opt": {"levle": "basic"}}})
    with pytest.raises(ConfigError, match=r"^params.yaml: variants.onnx_opt.levle: unknown key"):
        build_variant("tiny", "onnx_opt", params, stage_project)
    catalog = {"tiny": tiny_config(overrides={"onnx_opt": {"level": "fastest"}}).model_dump()}
    params = Params.model_validate(make_params().model_dump() | {"variants": {"onnx_opt": {}}, "catalog": catalog})
    with pytest.raises(ConfigError, match=r"^params.yaml: catalog.tiny.overrides.onnx_opt.level: Input should be"):
        build_variant("tiny", "onnx_opt", params, stage_project)
    assert not layout.variant_dir("tiny", "onnx_opt", stage_project).exists()


def test_failed_export_fails_onnx_variants_only(stage_project, monkeypatch):
    write_source(stage_project, export={"status": "failed", "reason": "ONNX export failed: boom"})
    monkeypatch.setattr(build_module, "call", lambda *a, **k: {"entry": "torch_model.json", "build": {}})
    assert (
        build_variant("tiny", "onnx_fp32", make_params(), stage_project).reason
        == "no ONNX export: ONNX export failed: boom"
    )
    assert build_variant("tiny", "torch_eager", make_params(), stage_project).status == "ok"


def test_unconfigured_variant_is_a_config_error(stage_project):
    from pipeline.core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"variants\.onnx_fp16: not configured"):
        build_variant("tiny", "onnx_fp16", make_params(), stage_project)


def test_a_benchmark_refuses_an_env_json_from_other_hardware(stage_project, machine):
    """A bench stage run by hand after a machine change: its env.json is not this hardware's."""
    from pipeline.core.errors import ConfigError

    env = layout.env_file(stage_project)
    write_json(env, json.loads(env.read_text()) | {"machine": {"name": "box", "hardware": "intel-6-167-2c"}})
    with pytest.raises(ConfigError, match=r"machine.hardware: intel-6-167-2c, this is .*: run `dvc repro`"):
        benchmark_variant("tiny", "onnx_fp32", make_params(), stage_project)
    assert not layout.metrics_file("tiny", "onnx_fp32", stage_project).exists()


def test_a_stage_logs_its_peak_memory_and_its_largest_child(tmp_path, monkeypatch):
    import subprocess

    from benchmarks.stage_memory import LINE, stage_peaks
    from pipeline.stage_runner import LOGS, run_stage

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("pipeline.core.config.load_params", lambda: None)

    def work(model, params):  # a child that holds 300 MB, as an isolated converter would
        hold = "b = bytearray(300 * 2**20); b[::4096] = b'x' * len(b[::4096])"
        subprocess.run([sys.executable, "-c", hold], check=True)
        return {"status": "ok"}

    assert run_stage(work, ["model"], ["m1"]) == 0
    (log,) = (tmp_path / LOGS).glob("*m1*.log")
    own, child, seconds = LINE.findall(log.read_text())[-1]
    assert int(child) >= 300 and float(seconds) > 0
    ((stage, (peak, _)),) = stage_peaks("m1", tmp_path / LOGS).items()
    assert peak == max(int(own), int(child)) and "m1" not in stage


def rescue_params(*also: str, **constraints) -> Params:
    """openvino_int8_acc rescues openvino_int8, onnx_int8_static_search onnx_int8_static (the registry
    says so); all are configured, and `also`."""
    return Params.model_validate(
        {
            "models": ["tiny"],
            "catalog": {"tiny": tiny_config().model_dump()},
            "variants": {"openvino_int8": {}, "openvino_int8_acc": {}, **{name: {} for name in also}},
            "machine_variants": {"onnx_int8_static": {}, "onnx_int8_static_search": {}},
            "select": {"constraints": {"max_accuracy_drop": 0.01, "min_cosine": 0.99, **constraints}},
        }
    )


FALLBACKS = [("openvino_int8_acc", "openvino_int8"), ("onnx_int8_static_search", "onnx_int8_static")]


@pytest.mark.parametrize(("fallback", "of"), FALLBACKS)
@pytest.mark.parametrize(
    ("rescued", "outcome"),
    [
        (metric(1.0, delta=0.0, cosine=0.999), {}),  # meets every quality constraint: no search
        # accuracy drop 0.05 > 0.01: both searches raise the task metric
        (metric(1.0, delta=-0.05, cosine=0.999), {"openvino_int8_acc": Kind.OK, "onnx_int8_static_search": Kind.OK}),
        # no task metric, neighbour recall 0.5 < 0.9: the ORT search raises the cosine, already above its target
        (metric(1.0, delta=None, cosine=0.999, recall=0.5), {"openvino_int8_acc": Kind.OK}),
        (metric(1.0, delta=None, cosine=0.95), {"openvino_int8_acc": Kind.OK, "onnx_int8_static_search": Kind.OK}),
        (metric(1.0, status="failed"), {"openvino_int8_acc": Kind.OK, "onnx_int8_static_search": Kind.OK}),
    ],
)
def test_a_fallback_searches_only_when_the_variant_it_rescues_breaks_a_quality_constraint_it_can_mend(
    stage_project, monkeypatch, fallback, of, rescued, outcome
):
    ran = []

    def the_search(target, kwargs, timeout, env=None, log=None):  # stands in for the search (NNCF's, ORT's)
        ran.append(kwargs["variant"])
        (Path(kwargs["out_dir"]) / "model.xml").write_text("<net/>")
        return {"entry": "model.xml", "runtime_config": {}, "build": {"seconds": 600.0}}

    monkeypatch.setattr(build_module, "call", the_search)
    records.write("tiny", of, rescued, stage_project)
    info = build_variant("tiny", fallback, rescue_params(min_neighbour_recall=0.9), stage_project)
    kind = outcome.get(fallback, Kind.NOT_NEEDED if not outcome else Kind.NOT_APPLICABLE)
    assert info.kind == kind and ran == ([fallback] if kind == Kind.OK else [])
    if kind == Kind.NOT_NEEDED:
        assert info.status == "skipped" and info.reason == (
            f"not needed: {of} meets tiny's quality constraints (task metric drop 0, worst-output fidelity 0.9990)"
        )
    elif kind == Kind.NOT_APPLICABLE:
        assert info.reason.startswith(
            "nothing to search: onnx_int8_static already keeps target_score 0.995 (0.999) on its scoring rows"
        )


@pytest.mark.parametrize(("fallback", "of"), FALLBACKS)
@pytest.mark.parametrize(
    ("rescued", "said"),
    [
        (metric(1.0, delta=-0.3, cosine=0.999), "a task metric drop of 0.3 against max_"),  # labels: the metric's drop
        (metric(1.0, delta=None, cosine=0.6), "a worst-output decision score of 0.6000 against "),  # no labels
    ],
)
def test_a_search_that_would_start_beyond_its_reach_is_not_started_and_says_why(
    stage_project, monkeypatch, fallback, of, rescued, said
):
    """No search on the corpus closed a gap of 0.18 or more: one that would start further than `reach` (0.1) from
    its bound is skipped in no time, its record naming where it would have started."""
    monkeypatch.setattr(build_module, "call", lambda *a, **k: pytest.fail("the search ran"))
    records.write("tiny", of, rescued, stage_project)
    info = build_variant("tiny", fallback, rescue_params(), stage_project)
    assert info.status == "skipped" and info.kind == Kind.NOT_APPLICABLE
    assert info.reason.startswith(f"{of}: out of reach: the search would start from {said}"), info.reason
    assert info.reason.endswith("beyond its reach (0.1: raise `reach` to search anyway)")


def test_a_run_time_quantized_int8_that_keeps_the_answers_makes_accuracy_control_unneeded(stage_project, monkeypatch):
    """Static INT8 broke max_metric_drop, but openvino_int8_dynamic (also rescued) meets every constraint."""
    monkeypatch.setattr(build_module, "call", lambda *a, **k: pytest.fail("accuracy control ran"))
    params = rescue_params("openvino_int8_dynamic")
    records.write("tiny", "openvino_int8", metric(1.0, delta=-0.05, cosine=0.95), stage_project)
    records.write("tiny", "openvino_int8_dynamic", metric(1.2, delta=0.0, cosine=0.999), stage_project)
    info = build_variant("tiny", "openvino_int8_acc", params, stage_project)
    assert info.kind == Kind.NOT_NEEDED
    assert info.reason.startswith("not needed: openvino_int8_dynamic meets tiny's quality constraints")


def test_a_fallback_without_the_record_it_decides_from_does_its_work(stage_project, monkeypatch):
    """The rescued variant not configured (or not measured): nothing says the search is not needed."""
    monkeypatch.setattr(build_module, "call", lambda *a, **k: {"entry": "m.xml", "runtime_config": {}, "build": {}})
    info = build_variant("tiny", "openvino_int8_acc", rescue_params(), stage_project)
    assert info.kind == Kind.OK


@pytest.mark.parametrize("op_types", [None, ["Conv", "MatMul"]])
def test_dynamic_int8_of_a_convolutional_model_is_not_applicable_before_any_process(
    stage_project, monkeypatch, op_types
):
    """ORT recommends static INT8 for CNNs (its ConvInteger has no fast CPU kernel): the export's family
    decides, with no build process; op_types set in params.yaml builds it anyway."""
    write_source(stage_project, family={"model_type": "cnn", "how": "detected: 53 Conv, no attention"})
    ran = []
    monkeypatch.setattr(build_module, "call", lambda *a, **k: ran.append(1) or {"entry": "m.onnx", "build": {}})
    params = Params.model_validate(
        make_params().model_dump() | {"variants": {"onnx_int8_dynamic": {"op_types": op_types}}}
    )
    info = build_variant("tiny", "onnx_int8_dynamic", params, stage_project)
    if op_types:
        assert info.kind == Kind.OK and ran == [1]
    else:
        assert info.kind == Kind.NOT_APPLICABLE and ran == []
        assert info.reason.startswith("a convolutional model (detected: 53 Conv, no attention): ORT's dynamic")


def test_each_skip_rule_names_what_asks_it():
    """The rules table (docs/variants.md) names the function of pipeline.optimize.applicability that asks
    each rule, or the exception a running build raises."""
    for rule in applicability.RULES:
        asker = rule.by.split(":")[0]
        assert asker in ("raise NotApplicable", "raise Unavailable") or callable(getattr(applicability, asker)), rule
