"""The report stage on synthetic metrics: the traps it warns about, and the files it writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from pipeline.core.config import SelectConfig, load_params
from pipeline.core.errors import PipelineError
from pipeline.core.outcome import Skip
from pipeline.core.records import Choice, Kind
from pipeline.core.records.env import Cpu
from pipeline.decide.selection import screen
from pipeline.present.diagnosis import not_built, traps
from pipeline.present.report import write_reports
from tests.conftest import REPO
from tests.helpers import metric, record_choice

NO_FP16_CPU = Cpu(native_fp16=False, vnni=True)
LM_REASON = "a text-generation variant; spam_fnn is not a text-generation model"


def warnings_for(metrics: dict) -> list[str]:
    config = SelectConfig()
    screened = screen(metrics, config, config.constraints)
    choice = Choice(status="ok" if screened.chosen else "none", chosen=screened.chosen or "none", why=screened.why)
    return traps(metrics, NO_FP16_CPU, choice)


def test_fp16_slower_and_int8_no_faster_are_explained():
    found = warnings_for({
        "onnx_fp32": metric(1.0), "onnx_fp16": metric(1.5, precision="fp16"),
        "onnx_int8_dynamic": metric(0.98, precision="int8", peak=3000.0),
    })  # fmt: skip
    assert any(w.startswith("`onnx_fp16` is slower than `onnx_fp32`") and "no native FP16" in w for w in found)
    int8 = next(w for w in found if w.startswith("`onnx_int8_dynamic` is not faster"))
    assert "VNNI (reports/env.json)" in int8 and "reach 3.00x FP32's peak throughput" in int8
    assert "overhead" not in int8  # a cause nothing measured is never stated


def test_each_latency_trap_fires_on_one_side_of_its_threshold_only():
    """FP16 warns above fp32 * (1 + margin); INT8 warns above fp32 * (1 - margin); margin 5% here."""
    fp32 = metric(1.0)
    assert any("onnx_fp16" in w for w in warnings_for({"onnx_fp32": fp32, "onnx_fp16": metric(1.06)}))
    assert not any("onnx_fp16" in w for w in warnings_for({"onnx_fp32": fp32, "onnx_fp16": metric(1.04)}))
    assert any("onnx_int8_static" in w for w in warnings_for({"onnx_fp32": fp32, "onnx_int8_static": metric(0.96)}))
    assert not any("onnx_int8_static" in w for w in warnings_for({"onnx_fp32": fp32, "onnx_int8_static": metric(0.94)}))
    # the case: 2.514 ms INT8 against 5.7 ms FP32 is 2.3x faster, never "no faster", however noisy
    openvino = {
        "openvino_fp32": metric(5.7, runtime="openvino", noise=2000.0),
        "openvino_int8": metric(2.514, runtime="openvino", noise=7000.0),
    }
    assert not any(w.startswith("`openvino_int8` is not faster") for w in warnings_for(openvino))


def test_gpu_pairs_warn_without_blaming_the_cpu_and_skips_are_listed_once_per_reason():
    gpu = {"device": "cuda:0", "gpu": {"gpu": "NVIDIA L4", "compute_capability": "8.9"}}
    no_driver = {"reason": "target cuda:0 is not usable here: no NVIDIA driver"}
    found = warnings_for({
        "tensorrt_fp16": metric(1.0, runtime="tensorrt", **gpu),
        "tensorrt_int8": metric(0.99, runtime="tensorrt", precision="int8", **gpu),
        "onnx_cuda_fp32": metric(1.0, status="skipped", **no_driver),
        "onnx_cuda_fp16": metric(1.0, status="skipped", **no_driver),
    })  # fmt: skip
    int8 = next(w for w in found if w.startswith("`tensorrt_int8` is not faster than `tensorrt_fp16`"))
    assert "measured on cuda:0 (NVIDIA L4, compute capability 8.9)" in int8 and "VNNI" not in int8
    assert "`onnx_cuda_fp16`, `onnx_cuda_fp32` were skipped: target cuda:0 is not usable here" in " ".join(found)


def test_variants_that_do_not_apply_are_no_warning():
    """A single-pass model's report: the text-generation variants have no stages (params say they
    cannot apply) and are listed once apart from the warnings, with a record of such a variant from
    an older revision (the kind says so, the reason text is not parsed) in the same line."""
    older = {"lm_onnx_fp32": metric(1.0, status="skipped", kind=Kind.NOT_APPLICABLE, reason=LM_REASON)}
    found = {"onnx_fp32": metric(1.0), "onnx_opt": metric(1.0), **older}
    recorded = Choice(
        status="none",
        chosen="none",
        not_applicable=dict.fromkeys(("lm_torch", "lm_openvino_int4", "lm_onnx_fp32"), LM_REASON),
    )
    planned = recorded.not_applicable_skips()  # what the report reads: the select record's, typed
    assert set(planned.values()) == {Skip(Kind.NOT_APPLICABLE, LM_REASON)}
    assert not any("lm_" in w for w in warnings_for(found))
    assert not_built(found, planned) == [f"`lm_torch`, `lm_openvino_int4`, `lm_onnx_fp32`: {LM_REASON}"]


def test_differences_within_the_noise_margin_are_not_traps():
    assert warnings_for({"onnx_fp32": metric(1.0), "onnx_fp16": metric(1.03), "onnx_int8_dynamic": metric(0.7)}) == []


def test_noisy_failed_skipped_and_infeasible_are_reported():
    metrics = {
        "onnx_fp32": metric(1.0, noise=25.0, delta=-0.5),
        "openvino_fp32": metric(1.0, status="failed"),
        "onnx_int8_static": metric(1.0, status="skipped", reason="no calibration data"),
    }
    found = warnings_for(metrics)
    assert found[0].startswith("No variant meets the constraints: no variant meets the constraints; closest: onnx_fp32")
    assert any(w.startswith("Noisy measurements: `onnx_fp32` (±25.0%)") for w in found)
    assert "`openvino_fp32` failed: it broke" in found
    assert "`onnx_int8_static` was skipped: no calibration data" in found


def test_write_reports_makes_markdown_pngs_and_dvc_plot_data(tmp_path: Path):
    results = tmp_path
    params = yaml.safe_load((REPO / "params.yaml").read_text()) | {"models": ["spam_fnn"]}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    folder = results / "reports" / "details" / "spam_fnn"
    folder.mkdir(parents=True)
    variants = {"onnx_fp32": metric(1.0), "onnx_opt": metric(0.6), "onnx_int8_dynamic": metric(0.5, delta=-0.3)}
    for name, data in variants.items():
        (folder / f"{name}.json").write_text(data.model_dump_json(exclude_none=True))
    params = load_params(tmp_path / "params.yaml")
    with pytest.raises(PipelineError, match=r"spam_fnn.json: no recorded choice for spam_fnn: run the select stage"):
        write_reports(params, tmp_path)
    record_choice("spam_fnn", params, tmp_path)
    result = write_reports(params, tmp_path)
    assert result["status"] == "ok"
    report = (results / "reports" / "report" / "spam_fnn.md").read_text()
    assert "**Deploy `onnx_opt`**" in report and "breaks max_metric_drop" in report
    warnings = report.partition("## Warnings")[2].partition("\n## ")[0]
    # the variants that do not apply (no stages, no records) are listed once, apart, with the reason
    listed = next(line for line in report.splitlines() if line.endswith(LM_REASON))
    assert "lm_" not in warnings and report.count("`lm_torch`") == 1 and "`lm_torch`" in listed
    assert "`jax_jit`, `jax_xla`: needs a jax source; spam_fnn is a torch model" in report
    row = next(
        line for line in (results / "reports" / "report" / "index.md").read_text().splitlines() if "[spam_fnn]" in line
    )
    # the index counts the report's warnings, and the variants that do not apply are none of them
    assert row.split("|")[-2].strip() == str(warnings.count("\n- ")), row
    for kind in ("latency_accuracy", "size", "throughput", "memory"):
        assert (results / "reports" / "report" / "img" / "spam_fnn" / f"{kind}.png").stat().st_size > 1000
        assert f"img/spam_fnn/{kind}.png" in report
    points = json.loads((results / "reports" / "plots" / "latency_accuracy" / "spam_fnn.json").read_text())
    assert {p["variant"]: p["chosen"] for p in points} == {
        "onnx_fp32": False,
        "onnx_opt": True,
        "onnx_int8_dynamic": False,
    }
    throughput = json.loads((results / "reports" / "plots" / "throughput" / "spam_fnn.json").read_text())
    assert {(r["variant"], r["batch"]) for r in throughput} >= {("onnx_opt", 1), ("onnx_opt", 8)}
    assert "[spam_fnn](spam_fnn.md)" in (results / "reports" / "report" / "index.md").read_text()


def test_null_constraints_and_a_model_without_labels_do_not_crash_the_report(tmp_path: Path):
    results = tmp_path
    params = yaml.safe_load((REPO / "params.yaml").read_text()) | {"models": ["minilm_l6"]}
    params["select"]["constraints"] |= {"max_metric_drop": None, "min_cosine": None}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    folder = results / "reports" / "details" / "minilm_l6"
    folder.mkdir(parents=True)
    variants = {
        "onnx_fp32": metric(1.0, delta=None, cosine=1.0),
        "onnx_int8_dynamic": metric(0.5, delta=None, cosine=0.3),
    }
    for name, data in variants.items():
        (folder / f"{name}.json").write_text(data.model_dump_json(exclude_none=True))
    params = load_params(tmp_path / "params.yaml")
    record_choice("minilm_l6", params, tmp_path)
    assert write_reports(params, tmp_path)["status"] == "ok"
    index = (results / "reports" / "report" / "index.md").read_text()
    assert "| onnx_int8_dynamic |" in index and "cos 0.3000" in index  # no constraint: the fastest wins
    points = json.loads((results / "reports" / "plots" / "latency_accuracy" / "minilm_l6.json").read_text())
    assert {p["variant"]: round(p["quality_loss"], 4) for p in points} == {"onnx_fp32": 0.0, "onnx_int8_dynamic": 0.7}


def test_where_the_time_goes_puts_fp32_next_to_int8_per_runtime(tmp_path: Path):
    from pipeline.core import layout
    from pipeline.core.files import write_json
    from pipeline.present.report import where_the_time_goes

    profiles = {
        "onnx_fp32": {"calls": 10, "top": {"Conv": {"share_pct": 80.0, "executions": 20, "total_ms": 8.0}}},
        "onnx_int8_static": {"calls": 10, "top": {"QLinearConv": {"share_pct": 60.0, "executions": 20,
                                                                  "total_ms": 3.0}}},
        "openvino_int8": {"reason": "not measured"},
    }  # fmt: skip
    for variant, profile in profiles.items():
        write_json(layout.profile_file("m", variant, tmp_path), profile)
    metrics = {v: metric(1.0) for v in profiles}
    lines = where_the_time_goes("m", metrics, tmp_path)
    assert "| operator type | `onnx_fp32` | `onnx_int8_static` |" in lines
    assert "| Conv | 80% (0.8 ms) |  |" in lines and "| QLinearConv |  | 60% (0.3 ms) |" in lines
    assert not any("openvino" in line for line in lines)  # no profile, no column
