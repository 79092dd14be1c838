"""Measuring to the precision the decision needs (pipeline.measure.budget): the out-of-contention rule,
the fidelity row count, and every reader of a record measured on the short budget."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

from pipeline.core.config import BenchConfig, Constraints, SelectConfig, UnlabelledRows, load_params
from pipeline.core.records import VariantRecord
from pipeline.core.stats import Interval
from pipeline.decide.selection import Candidate, screen
from pipeline.measure.budget import (
    ContentionScreen,
    Rival,
    best_known,
    contention_screen,
    eval_batch,
    eval_rows,
    out_of_contention,
    rows_bounding_worst,
)
from pipeline.present.report import write_reports
from pipeline.present.summary import rows, short_budget_notes, worst_row_bound
from tests.conftest import REPO
from tests.helpers import metric, record_choice

BEST = Rival("onnx_opt", p50=2.2, low=2.1, high=2.3)
SHORT_REASON = "out of contention: p50 7.5 ms (7.2-7.8) is 3.4x onnx_opt's p50 2.2 ms (2.1-2.3) ..."


def short(p50: float, **fields) -> VariantRecord:
    """A record as the worker writes it for a variant out of contention: no sweep, a short screen."""
    record = metric(p50, **fields).model_dump(exclude_unset=True)
    del record["throughput_sps"]
    return VariantRecord.model_validate(
        record | {"screen": {"budget": "short", "reason": SHORT_REASON, "best_known": "onnx_opt"}}
    )


@pytest.mark.parametrize(
    ("low", "best_high", "ratio", "out"),
    [(3.01, 2.0, 1.5, True), (3.0, 2.0, 1.5, False), (2.5, 2.0, 1.5, False), (1.9, 2.0, 1.0, False)],
)
def test_out_of_contention_needs_the_whole_interval_beyond_ratio_times_the_best_top(low, best_high, ratio, out):
    assert out_of_contention(low, best_high, ratio) is out


def test_the_screen_judges_an_interval_and_says_why():
    judge = ContentionScreen(BEST, 1.5).judge
    far, near = Interval(7.5, 7.2, 7.8, 10), Interval(3.5, 3.3, 3.7, 10)
    assert judge(far).budget == "short" and judge(far).best_known == "onnx_opt"
    assert "3.4x onnx_opt's p50 2.2 ms (2.1-2.3)" in judge(far).reason
    assert judge(near).budget == "full" and "within reach" in judge(near).reason
    assert judge(Interval(7.5, -math.inf, math.inf, 3)).budget == "full"  # no interval yet: nothing is clear
    assert ContentionScreen().judge(far).budget == "full"  # nothing to compare with
    assert ContentionScreen(BEST, 1.5).stop(far) and ContentionScreen(BEST, 1.5).stop(near) is None
    off = ContentionScreen(off="select.objective is throughput: the sweep is the figure that decides")
    assert off.judge(far).budget == "full" and "throughput" in off.judge(far).reason


def test_best_known_is_this_machines_fastest_other_variant_that_keeps_quality():
    here = {"machine": "box"}
    found = {
        "me": metric(0.1, **here),  # the variant being measured: an older record of itself
        "elsewhere": metric(0.2, machine="other"),
        "broken": metric(0.3, status="failed"),
        "inaccurate": metric(0.4, delta=-0.5, **here),  # breaks max_accuracy_drop: cannot win
        "onnx_opt": metric(1.0, **here),
        "onnx_fp32": metric(2.0, **here),
    }
    best = best_known(found, "box", "me", Constraints())
    assert best is not None and best.variant == "onnx_opt" and best.high == pytest.approx(1.01)
    assert best_known(found, None, "me", Constraints()) is None  # no env.json: no machine to match


def test_rows_bounding_the_worst_row():
    assert rows_bounding_worst(0.01, 0.05) == 299
    for q, alpha in ((0.01, 0.05), (0.001, 0.01), (0.05, 0.1)):
        n = rows_bounding_worst(q, alpha)
        assert (1 - q) ** n <= alpha < (1 - q) ** (n - 1)  # the fewest that do


def test_eval_rows_keep_labels_and_cut_unlabelled_rows():
    config = UnlabelledRows()
    assert eval_rows(2000, True, config).used == 2000 and "labelled" in eval_rows(2000, True, config).rule
    assert eval_rows(2000, False, config).used == 299 and eval_rows(2000, False, config).available == 2000
    assert eval_rows(100, False, config).used == 100  # fewer than the bound: all of them
    assert eval_rows(2000, False, config).bound == eval_rows(100, False, config).bound == 299  # the bound, recorded
    short = eval_rows(2000, False, config, short=True)  # out of contention: the looser bound, said so
    assert short.used == short.bound == 59 and "out of contention" in short.rule
    assert eval_rows(2000, True, config, short=True).used == 2000  # labels: every row still
    assert eval_rows(2000, True, config).bound is None  # no bound: every labelled row counts


def test_the_summary_quotes_the_row_bound_the_bench_recorded_beside_its_figure():
    config = UnlabelledRows()
    full = metric(1.0, eval_rows=eval_rows(2000, False, config))
    looser = short(7.5, eval_rows=eval_rows(2000, False, config, short=True))  # out of contention: not the rule
    assert worst_row_bound([full, looser, metric(1.0)]) == "299"
    assert worst_row_bound([metric(1.0)]) == "fewest"  # labelled, or a record from before the bound was kept


def test_eval_batch_is_the_peak_batch_capped_and_the_fixed_batch_for_fixed_models():
    bench = BenchConfig()  # eval_batch 64
    assert eval_batch(8, bench, None, None) == 8
    assert eval_batch(128, bench, None, None) == 64
    assert eval_batch(None, bench, None, None) == 64  # no sweep: as before
    assert eval_batch(32, bench, 16, None) == 16
    assert eval_batch(None, bench, None, 1) == eval_batch(128, bench, None, 4) - 3 == 1


def test_contention_ratio_is_validated():
    with pytest.raises(ValueError):
        BenchConfig.model_validate({"contention_ratio": 0.9})
    assert BenchConfig.model_validate({"contention_ratio": None}).contention_ratio is None


def test_a_record_without_a_sweep_has_no_peak_metric_and_says_why_in_the_summary():
    found = {"onnx_opt": metric(2.2), "onnx_int8_dynamic": short(7.5)}
    assert found["onnx_int8_dynamic"].metrics().peak_sps is None
    table = {row[0]: row for row in rows(found, ["onnx_opt", "onnx_int8_dynamic"], "onnx_opt")}
    assert "not measured: out of contention" in table["onnx_int8_dynamic"]
    assert short_budget_notes(found) == [f"onnx_int8_dynamic: {SHORT_REASON}"]


def test_selection_ranks_a_missing_throughput_last_and_names_it():
    found = {"onnx_opt": metric(2.2, peak=500.0), "onnx_int8_dynamic": short(7.5, size=0.3)}  # on the front
    config = SelectConfig(objective="throughput")
    chosen = screen(found, config, config.constraints)
    assert chosen.chosen == "onnx_opt" and "ahead of onnx_int8_dynamic (throughput not measured" in chosen.why
    assert "throughput not measured: out of contention" in chosen.rejected["onnx_int8_dynamic"]
    assert Candidate.from_record("onnx_int8_dynamic", found["onnx_int8_dynamic"], "p50").throughput_sps is None
    latency = SelectConfig()
    assert screen(found, latency, latency.constraints).chosen == "onnx_opt"


def test_the_report_lists_short_budgets_and_plots_only_measured_sweeps(tmp_path: Path):
    params = yaml.safe_load((REPO / "params.yaml").read_text()) | {"models": ["spam_fnn"]}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    folder = tmp_path / "reports" / "details" / "spam_fnn"
    folder.mkdir(parents=True)
    for name, record in {"onnx_fp32": metric(3.0), "onnx_opt": metric(2.2), "onnx_int8_dynamic": short(7.5)}.items():
        (folder / f"{name}.json").write_text(record.model_dump_json(exclude_none=True))
    params = load_params(tmp_path / "params.yaml")
    record_choice("spam_fnn", params, tmp_path)
    assert write_reports(params, tmp_path)["status"] == "ok"
    report = (tmp_path / "reports" / "report" / "spam_fnn.md").read_text()
    assert "## Measured on a short budget (out of contention)" in report
    assert f"- onnx_int8_dynamic: {SHORT_REASON}" in report and "not measured: out of contention" in report
    plotted = (tmp_path / "reports" / "plots" / "throughput" / "spam_fnn.json").read_text()
    assert "onnx_int8_dynamic" not in plotted and "onnx_opt" in plotted


def test_the_screen_reads_this_machines_records_and_is_off_for_throughput(tmp_path: Path):
    params = load_params(REPO / "params.yaml")
    folder = tmp_path / "reports" / "details" / "spam_fnn"
    folder.mkdir(parents=True)
    (tmp_path / "reports" / "env.json").write_text(json.dumps({"machine": {"name": "box", "hardware": "box"}}))
    (folder / "onnx_opt.json").write_text(metric(2.2, machine="box").model_dump_json(exclude_none=True))
    found = contention_screen(params, "spam_fnn", "onnx_int8_dynamic", tmp_path)
    assert found.best is not None and found.best.variant == "onnx_opt" and found.ratio == 3
    throughput = params.model_copy(update={"select": SelectConfig(objective="throughput")})
    assert contention_screen(throughput, "spam_fnn", "onnx_int8_dynamic", tmp_path).off
    (folder / "broken.json").write_text("{}")
    assert "could not be read" in contention_screen(params, "spam_fnn", "onnx_int8_dynamic", tmp_path).off
