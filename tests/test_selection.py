"""Selection on synthetic metrics: constraints, the Pareto front, ties, nothing feasible."""

from __future__ import annotations

import pytest

from pipeline.core.config import Constraints, SelectConfig
from pipeline.core.records import Accuracy, VariantRecord
from pipeline.decide.selection import Candidate, dominates, overlapping, pareto_front, screen, tie_break_key
from tests.helpers import metric as m

LATENCY = SelectConfig()


def test_fastest_variant_within_the_accuracy_drop_wins():
    metrics = {"fp32": m(1.0), "int8": m(0.5, delta=-0.005), "int8_bad": m(0.3, delta=-0.2)}
    choice = screen(metrics, LATENCY, Constraints(max_accuracy_drop=0.01))
    assert choice.chosen == "int8"
    assert choice.rejected["int8_bad"] == "breaks max_metric_drop: task metric drop 0.2 > 0.01"
    assert "lowest p50 latency (p50 0.5 ms) of 2 variant(s)" in choice.why
    assert "100.0% ahead of fp32" in choice.why


def test_every_constraint_is_checked_in_order():
    metrics = {
        "slow": m(5.0), "big": m(1.0, size=50), "hungry": m(1.0, rss=900), "tf": m(0.1, runtime="tensorflow"),
        "failed": m(0.01, status="failed"), "ok": m(2.0),
    }  # fmt: skip
    constraints = Constraints(max_latency_ms=3.0, max_size_mb=10, max_memory_mb=500, runtimes=["onnxruntime"])
    choice = screen(metrics, LATENCY, constraints)
    assert choice.chosen == "ok"
    assert choice.rejected["slow"].startswith("breaks max_latency_ms: 5 > 3 ms (p50)")
    assert choice.rejected["big"].startswith("breaks max_size_mb")
    assert choice.rejected["hungry"].startswith("breaks max_memory_mb")
    assert choice.rejected["tf"].startswith("breaks runtimes: runtime tensorflow not allowed")
    assert choice.rejected["failed"] == "status failed: it broke"


def test_percentile_is_the_one_configured():
    metrics = {"steady": m(1.0), "spiky": m(0.9)}
    metrics["spiky"].latency_ms.p99 = 10.0
    assert screen(metrics, SelectConfig(percentile="p50"), Constraints()).chosen == "spiky"
    assert screen(metrics, SelectConfig(percentile="p99"), Constraints()).chosen == "steady"


def test_other_objectives():
    metrics = {"fast": m(0.5, size=4.0, peak=1000), "small": m(1.0, size=1.0, peak=500), "wide": m(2.0, peak=9000)}
    assert screen(metrics, SelectConfig(objective="size"), Constraints()).chosen == "small"
    assert screen(metrics, SelectConfig(objective="throughput"), Constraints()).chosen == "wide"


def test_ties_are_decided_by_accuracy_then_size_then_name():
    tie = {"b": m(1.0, delta=-0.002), "a": m(1.0, delta=0.0)}
    assert screen(tie, LATENCY, Constraints()).chosen == "a"  # same latency: the more accurate
    tie = {"b": m(1.0, size=1.0), "a": m(1.0, size=2.0)}
    assert screen(tie, LATENCY, Constraints()).chosen == "b"  # then the smaller
    tie = {"b": m(1.0), "a": m(1.0)}
    assert screen(tie, LATENCY, Constraints()).chosen == "a"  # then by name: deterministic


def test_overlapping_intervals_make_contenders_for_the_re_measure():
    """An overlapping interval, or a figure within the drift a rerun can show (2x), makes a contender."""
    metrics = {"x": m(1.0, noise=8.0), "y": m(1.9, noise=1.0), "z": m(2.5, noise=60.0), "w": m(2.5, noise=1.0)}
    feasible = [Candidate.from_record(v, metrics[v], "p50") for v in ("x", "y", "z", "w")]
    assert [c.variant for c in overlapping(feasible[0], feasible, 4, 2.0)] == ["x", "y", "z"]  # z reaches 1.0 < 1.08
    assert [c.variant for c in overlapping(feasible[0], feasible, 2, 2.0)] == ["x", "y"]
    assert [c.variant for c in overlapping(feasible[0], feasible, 1, 2.0)] == ["x"]


def test_tie_break_order_is_fidelity_then_footprint_size_and_packages():
    base = {"delta": None}
    order = lambda metrics: sorted(  # noqa: E731
        (Candidate.from_record(v, x, "p50") for v, x in metrics.items()), key=tie_break_key
    )
    assert order({"a": m(1, cosine=0.999, **base), "b": m(1, cosine=0.9999, **base)})[0].variant == "b"
    assert order({"a": m(1, rss=300), "b": m(1, rss=100)})[0].variant == "b"
    assert order({"a": m(1, rss=101), "b": m(1, rss=102, size=0.5)})[0].variant == "b"  # 1 MB apart: equal
    assert order({"a": m(1, runtime="jax"), "b": m(1, runtime="openvino")})[0].variant == "b"  # jax + flax


def test_nothing_feasible_names_the_closest_and_chooses_nothing():
    metrics = {"near": m(1.1, delta=-0.02), "far": m(9.0, delta=-0.02), "worse": m(1.05, delta=-0.5)}
    choice = screen(metrics, LATENCY, Constraints(max_latency_ms=1.0, max_accuracy_drop=0.01))
    assert choice.chosen is None and choice.feasible == []
    assert choice.closest == "near"
    assert choice.why.startswith("no variant meets the constraints; closest: near (task metric drop 0.02 > 0.01;")


def test_without_a_task_metric_every_outputs_cosine_decides():
    metrics = {"good": m(1.0, delta=None, cosine=0.995), "broken": m(0.5, delta=None, cosine=0.3)}
    choice = screen(metrics, LATENCY, Constraints(max_accuracy_drop=0.01, min_cosine=0.99))
    assert choice.chosen == "good"  # max_accuracy_drop cannot apply: no variant is rejected for lacking a delta
    assert choice.rejected["broken"] == "breaks min_cosine: output y: worst row's cosine 0.3000 < 0.99"
    assert screen(metrics, LATENCY, Constraints(min_cosine=None)).chosen == "broken"
    unknown = screen({"reg": m(1.0, delta=None, cosine=None)}, LATENCY, Constraints())
    assert unknown.chosen is None and "fidelity unknown" in unknown.rejected["reg"]


def test_with_labels_every_output_is_still_checked_on_its_worst_row():
    """Old behaviour: with labels only the first output's task metric counted, so a variant whose
    second output was destroyed passed; and the cosine checked was the mean, not the worst row."""
    metrics = {"int8": m(0.5, delta=-0.005, cosine=0.9999), "fp32": m(1.0, cosine=1.0)}
    second = metrics["int8"].outputs["y"].model_copy(update={"cosine_mean": 0.999, "cosine_min": 0.5})
    metrics["int8"].outputs["second"] = second
    choice = screen(metrics, LATENCY, Constraints(max_accuracy_drop=0.01, min_cosine=0.99))
    assert choice.chosen == "fp32" and "output second: worst row's cosine 0.5000" in choice.rejected["int8"]


def test_one_value_outputs_are_checked_by_their_worst_rows_error():
    """spam_fnn's probability without labels: cosine over the column 0.997, yet one row moved by 0.76."""
    flipped = m(0.5, delta=None, cosine=0.997)
    flipped.outputs["y"] = flipped.outputs["y"].model_copy(
        update={"values_per_row": 1, "max_abs_diff": 0.76, "max_rel_diff": 0.76}
    )
    choice = screen({"int8": flipped, "fp32": m(1.0, cosine=1.0)}, LATENCY, Constraints(max_rel_error=0.1))
    assert choice.chosen == "fp32" and "worst row's error 0.76 > 0.1" in choice.rejected["int8"]


def test_max_memory_mb_limits_the_footprint_not_the_process_rss():
    metrics = {"big": m(0.5, rss=150), "small": m(1.0, rss=50)}  # peak RSS is rss + 50 MB of interpreter
    assert screen(metrics, LATENCY, Constraints(max_memory_mb=120)).rejected["big"].endswith("150 > 120 MB footprint")
    assert screen(metrics, LATENCY, Constraints(max_memory_mb=160)).chosen == "big"


def test_dominated_variants_name_their_dominator():
    metrics = {"good": m(1.0, size=1.0), "worse": m(2.0, size=2.0), "smaller": m(3.0, size=0.5)}
    choice = screen(metrics, LATENCY, Constraints())
    assert choice.chosen == "good"
    assert choice.rejected["worse"].startswith("dominated by good: p50 1 vs 2 ms")
    assert choice.rejected["smaller"].startswith("on the Pareto front, but good wins on the objective")
    assert sorted(choice.pareto) == ["good", "smaller"]


def test_pareto_front_and_domination():
    a = Candidate("a", "ort", "cpu", 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, None, {})
    b = Candidate("b", "ort", "cpu", 2.0, 2.0, 2.0, 1.0, 1.0, 1.0, 0.0, None, {})
    c = Candidate("c", "ort", "cpu", 2.0, 2.0, 2.0, 1.0, 0.5, 1.0, 0.0, None, {})
    assert dominates(a, b) and not dominates(b, a) and not dominates(a, a)
    assert [x.variant for x in pareto_front([a, b, c])] == ["a", "c"]


def test_per_model_constraints_override_the_global_ones():
    config = SelectConfig(constraints=Constraints(max_latency_ms=1.0), models={"big": {"max_latency_ms": 50.0}})
    assert config.constraints_for("big").max_latency_ms == 50.0
    assert config.constraints_for("small").max_latency_ms == 1.0
    with pytest.raises(Exception, match=r"select\.models\.big\.max_latency_ms"):
        SelectConfig(models={"big": {"max_latency_ms": -1}}).constraints_for("big")


def test_variant_allow_list_pins_the_candidates():
    metrics = {"fast": m(0.1), "pinned": m(2.0)}
    choice = screen(metrics, LATENCY, Constraints(variants=["pinned"]))
    assert choice.chosen == "pinned"
    assert choice.rejected["fast"] == "breaks variants: variant not in the allowed list (pinned)"


def test_a_users_metric_judges_every_output_and_an_error_rate_that_rises_is_a_drop():
    """A user's metric (a function over every output) decides: a second output's cosine is context. A
    lower-is-better metric (a character error rate) that rises by more than max_metric_drop rejects; the
    relative form compares the drop with the source's own value."""

    def user(p50: float, value: float, source: float, cosine: float) -> VariantRecord:
        record = m(p50, cosine=cosine)
        accuracy = {"metric": "models.ocr.metric:cer", "higher_is_better": False, "reads_every_output": True,
                    "value": value, "source_value": source, "delta": value - source}  # fmt: skip
        return record.model_copy(update={"accuracy": Accuracy.model_validate(accuracy)})

    metrics = {
        "int8": user(0.5, 0.052, 0.05, cosine=0.9),
        "bf16": user(0.7, 0.09, 0.05, 0.9999),
        "fp32": user(1, 0.05, 0.05, 1),
    }
    choice = screen(metrics, LATENCY, Constraints(max_metric_drop=0.01))
    assert choice.chosen == "int8"  # its cosine of 0.9 is not what its users read
    assert choice.rejected["bf16"].startswith("breaks max_metric_drop: task metric drop 0.04 > 0.01")
    relative = screen(metrics, LATENCY, Constraints(max_metric_drop=0.02, metric_drop="relative"))
    assert relative.chosen == "fp32" and "0.04 of the source's value > 0.02" in relative.rejected["int8"]


def test_metric_decides_false_judges_the_metrics_output_by_its_decisions_too():
    """spam_fnn's INT8 keeps its accuracy on the labels while 2% of its decisions at 0.5 flip: the metric alone
    ships it; `metric_decides: false` asks for both."""
    flips = m(0.5, delta=0.0)
    flips.outputs["y"] = flips.outputs["y"].model_copy(
        update={"output_kind": "probabilities", "decision_f1": 0.979, "decision_flips": 21, "decision_positives": 500}
        | {"decision_threshold": 0.5}
    )
    metrics = {"int8": flips, "fp32": m(1.0, delta=0.0)}
    assert screen(metrics, LATENCY, Constraints()).chosen == "int8"
    both = screen(metrics, LATENCY, Constraints(metric_decides=False))
    assert both.chosen == "fp32" and both.rejected["int8"].startswith("breaks min_decision_f1: output y: F1 of")
