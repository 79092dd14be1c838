"""Selection on synthetic metrics: constraints, the Pareto front, ties, nothing feasible."""

from __future__ import annotations

import pytest

from pipeline.core.config import Constraints, SelectConfig
from pipeline.decide.selection import Candidate, dominates, pareto_front, select
from tests.helpers import metric as m

LATENCY = SelectConfig()


def test_fastest_variant_within_the_accuracy_drop_wins():
    metrics = {"fp32": m(1.0), "int8": m(0.5, delta=-0.005), "int8_bad": m(0.3, delta=-0.2)}
    choice = select(metrics, LATENCY, Constraints(max_accuracy_drop=0.01))
    assert choice.chosen == "int8"
    assert choice.rejected["int8_bad"] == "breaks max_accuracy_drop: accuracy drop 0.2 > 0.01"
    assert "lowest p50 latency (p50 0.5 ms) of 2 variant(s)" in choice.why
    assert "100.0% ahead of fp32" in choice.why


def test_every_constraint_is_checked_in_order():
    metrics = {
        "slow": m(5.0), "big": m(1.0, size=50), "hungry": m(1.0, rss=900), "tf": m(0.1, runtime="tensorflow"),
        "failed": m(0.01, status="failed"), "ok": m(2.0),
    }  # fmt: skip
    constraints = Constraints(max_latency_ms=3.0, max_size_mb=10, max_memory_mb=500, runtimes=["onnxruntime"])
    choice = select(metrics, LATENCY, constraints)
    assert choice.chosen == "ok"
    assert choice.rejected["slow"].startswith("breaks max_latency_ms: 5 > 3 ms (p50)")
    assert choice.rejected["big"].startswith("breaks max_size_mb")
    assert choice.rejected["hungry"].startswith("breaks max_memory_mb")
    assert choice.rejected["tf"].startswith("breaks runtimes: runtime tensorflow not allowed")
    assert choice.rejected["failed"] == "status failed: it broke"


def test_percentile_is_the_one_configured():
    metrics = {"steady": m(1.0), "spiky": m(0.9)}
    metrics["spiky"]["latency_ms"]["p99"] = 10.0
    assert select(metrics, SelectConfig(percentile="p50"), Constraints()).chosen == "spiky"
    assert select(metrics, SelectConfig(percentile="p99"), Constraints()).chosen == "steady"


def test_other_objectives():
    metrics = {"fast": m(0.5, size=4.0, peak=1000), "small": m(1.0, size=1.0, peak=500), "wide": m(2.0, peak=9000)}
    assert select(metrics, SelectConfig(objective="size"), Constraints()).chosen == "small"
    assert select(metrics, SelectConfig(objective="throughput"), Constraints()).chosen == "wide"


def test_ties_are_decided_by_accuracy_then_size_then_name():
    tie = {"b": m(1.0, delta=-0.002), "a": m(1.0, delta=0.0)}
    assert select(tie, LATENCY, Constraints()).chosen == "a"  # same latency: the more accurate
    tie = {"b": m(1.0, size=1.0), "a": m(1.0, size=2.0)}
    assert select(tie, LATENCY, Constraints()).chosen == "b"  # then the smaller
    tie = {"b": m(1.0), "a": m(1.0)}
    assert select(tie, LATENCY, Constraints()).chosen == "a"  # then by name: deterministic


def test_a_win_inside_the_noise_is_called_a_tie():
    choice = select({"x": m(1.00, noise=8.0), "y": m(1.05, noise=2.0)}, LATENCY, Constraints())
    assert choice.chosen == "x" and "within this run's measurement noise (±8%): practically a tie" in choice.why


def test_nothing_feasible_names_the_closest_and_chooses_nothing():
    metrics = {"near": m(1.1, delta=-0.02), "far": m(9.0, delta=-0.02), "worse": m(1.05, delta=-0.5)}
    choice = select(metrics, LATENCY, Constraints(max_latency_ms=1.0, max_accuracy_drop=0.01))
    assert choice.chosen is None and choice.feasible == []
    assert choice.closest == "near"
    assert choice.why.startswith("no variant meets the constraints; closest: near (accuracy drop 0.02 > 0.01;")


def test_without_a_task_metric_every_outputs_cosine_decides():
    metrics = {"good": m(1.0, delta=None, cosine=0.995), "broken": m(0.5, delta=None, cosine=0.3)}
    choice = select(metrics, LATENCY, Constraints(max_accuracy_drop=0.01, min_cosine=0.99))
    assert choice.chosen == "good"  # max_accuracy_drop cannot apply: no variant is rejected for lacking a delta
    assert choice.rejected["broken"] == "breaks min_cosine: output cosine 0.3000 < 0.99"
    assert select(metrics, LATENCY, Constraints(min_cosine=None)).chosen == "broken"
    unknown = select({"reg": m(1.0, delta=None)}, LATENCY, Constraints())
    assert unknown.chosen is None and "fidelity unknown" in unknown.rejected["reg"]


def test_with_labels_the_task_metric_decides_not_the_cosine():
    metrics = {"int8": m(0.5, delta=-0.005, cosine=0.9), "fp32": m(1.0, cosine=1.0)}
    assert select(metrics, LATENCY, Constraints(max_accuracy_drop=0.01, min_cosine=0.99)).chosen == "int8"


def test_dominated_variants_name_their_dominator():
    metrics = {"good": m(1.0, size=1.0), "worse": m(2.0, size=2.0), "smaller": m(3.0, size=0.5)}
    choice = select(metrics, LATENCY, Constraints())
    assert choice.chosen == "good"
    assert choice.rejected["worse"].startswith("dominated by good: p50 1 vs 2 ms")
    assert choice.rejected["smaller"].startswith("on the Pareto front, but good wins on the objective")
    assert sorted(choice.pareto) == ["good", "smaller"]


def test_pareto_front_and_domination():
    a = Candidate("a", "ort", "cpu", 1.0, 1.0, 1.0, 1.0, 0.0, None, 0.0)
    b = Candidate("b", "ort", "cpu", 2.0, 1.0, 1.0, 1.0, 0.0, None, 0.0)
    c = Candidate("c", "ort", "cpu", 2.0, 1.0, 0.5, 1.0, 0.0, None, 0.0)
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
    choice = select(metrics, LATENCY, Constraints(variants=["pinned"]))
    assert choice.chosen == "pinned"
    assert choice.rejected["fast"] == "breaks variants: variant not in the allowed list (pinned)"
