"""Accuracy and fidelity against the FP32 source."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.core.evaluate import Judging, fidelity_block
from pipeline.core.records import Measured
from pipeline.core.task_metrics import BUILT_IN, accuracy_block, predictions


def test_predictions_by_shape():
    np.testing.assert_array_equal(predictions(np.array([[0.2], [0.7]])), [0, 1])
    np.testing.assert_array_equal(predictions(np.array([[0.1, 0.9, 0.0], [3, 1, 2]])), [1, 0])


def test_task_metric():
    logits = np.array([[0, 1], [1, 0], [0, 1], [0, 1]], dtype=np.float32)
    assert BUILT_IN["accuracy"]({"y": logits}, {"labels": np.array([1, 0, 0, 1])}) == pytest.approx(0.75)


def test_fidelity_separates_a_destroyed_variant_from_a_good_one_on_every_output():
    rng = np.random.default_rng(0)
    embedding = rng.standard_normal((64, 384)).astype(np.float32)
    hidden = rng.standard_normal((64, 16, 384)).astype(np.float32)
    reference = {"embedding": embedding, "hidden": hidden}
    good = {k: v + 0.02 * rng.standard_normal(v.shape).astype(np.float32) for k, v in reference.items()}
    broken = {k: 0.3 * v + rng.standard_normal(v.shape).astype(np.float32) for k, v in reference.items()}
    good_block = fidelity_block(reference, good, None)
    broken_block = fidelity_block(reference, broken, None)
    for name in reference:
        assert good_block[name]["cosine_mean"] > 0.999 and good_block[name]["rel_l2"] < 0.05
        assert broken_block[name]["cosine_mean"] < 0.4 and broken_block[name]["rel_l2"] > 0.9
        assert broken_block[name]["cosine_min"] <= broken_block[name]["cosine_mean"]
        assert good_block[name]["top1_agreement"] is None  # an embedding holds no class scores
    worst = lambda block: Measured(fidelity=block).worst_cosine  # noqa: E731
    assert worst(good_block) > 0.999 and worst(broken_block) < 0.4


def test_top1_agreement_only_for_class_scores_and_cosine_edge_cases():
    reference = {"y": np.array([[0.0, 1.0], [1.0, 0.0]]), "z": np.zeros((2, 3))}
    outputs = {"y": np.array([[0.1, 0.8], [0.2, 0.9]]), "z": np.zeros((2, 3))}
    block = fidelity_block(reference, outputs, "accuracy")
    assert block["y"]["max_abs_diff"] == pytest.approx(0.9) and block["y"]["top1_agreement"] == pytest.approx(0.5)
    assert block["z"]["top1_agreement"] is None  # only the first output holds the class scores
    assert block["z"]["cosine_mean"] == 1.0 and block["z"]["rel_l2"] == 0.0  # both zero: identical


def test_fidelity_rejects_missing_or_reshaped_outputs():
    with pytest.raises(ValueError, match="missing"):
        fidelity_block({"y": np.zeros((2, 2))}, {"z": np.zeros((2, 2))}, "accuracy")
    with pytest.raises(ValueError, match="shape"):
        fidelity_block({"y": np.zeros((2, 2))}, {"y": np.zeros((2, 3))}, "accuracy")


def test_accuracy_block_delta_against_source():
    labels = {"labels": np.array([1, 0, 1, 1])}
    reference = {"y": np.array([[0, 1], [1, 0], [0, 1], [1, 0]], dtype=np.float32)}  # 3/4 right
    variant = {"y": np.array([[0, 1], [1, 0], [1, 0], [1, 0]], dtype=np.float32)}  # 2/4 right
    block = accuracy_block(BUILT_IN["accuracy"], labels, reference, variant)
    assert block["metric"] == "accuracy"
    assert block["value"] == pytest.approx(0.5) and block["delta"] == pytest.approx(-0.25)


def test_without_labels_there_is_no_task_metric():
    reference = {"y": np.array([[0, 1], [1, 0]], dtype=np.float32)}
    block = accuracy_block(BUILT_IN["accuracy"], {}, reference, {"y": np.array([[0, 1], [0, 1]], dtype=np.float32)})
    assert block == {"metric": "none", "value": None, "source_value": None, "delta": None}


def test_scalar_and_negligible_outputs_do_not_fake_a_low_cosine():
    reference = np.array([[0.9], [0.0], [0.2], [1e-30]])  # a sigmoid that underflowed to 0 in one runtime
    output = np.array([[0.9], [1e-38], [0.2], [0.0]])
    block = fidelity_block({"p": reference}, {"p": output}, "binary_accuracy")["p"]
    assert block["cosine_mean"] == pytest.approx(1.0) and block["cosine_min"] == pytest.approx(1.0)
    assert block["output_kind"] == "probabilities" and block["decision_f1"] == 1.0 and block["decision_flips"] == 0
    flipped = fidelity_block({"p": reference}, {"p": 1 - reference}, "binary_accuracy")["p"]
    assert flipped["cosine_mean"] < 0.5  # one value per sample: the column's cosine still sees a broken output
    relu = np.zeros((3, 8))
    relu[0] = 1.0
    assert fidelity_block({"e": relu}, {"e": relu + 1e-9 * (relu == 0)}, None)["e"]["cosine_min"] == pytest.approx(1.0)


def test_neighbour_recall_separates_permuted_embeddings_from_a_good_variant():
    """Every row's own embedding, slightly perturbed, keeps the neighbours; the same embeddings handed
    to the wrong rows keep each vector and its norm (an argmax, a mean, a histogram see nothing)."""
    rng = np.random.default_rng(0)
    reference = rng.normal(size=(200, 32))
    good = reference + 0.01 * rng.normal(size=reference.shape)
    permuted = reference[rng.permutation(len(reference))]
    good_block = fidelity_block({"e": reference}, {"e": good}, None, embedding=True)["e"]
    broken_block = fidelity_block({"e": reference}, {"e": permuted}, None, embedding=True)["e"]
    assert good_block["neighbour_recall"] > 0.95 and good_block["similarity_rank_corr"] > 0.99
    assert broken_block["neighbour_recall"] < 0.2 and abs(broken_block["similarity_rank_corr"]) < 0.2
    assert (
        fidelity_block({"p": reference}, {"p": good}, "accuracy", embedding=True)["p"].get("neighbour_recall") is None
    )  # class scores
    assert fidelity_block({"e": reference}, {"e": good}, None)["e"].get("neighbour_recall") is None  # not declared


def test_neighbour_recall_breaks_the_selection_constraint():
    from pipeline.core.config import Constraints
    from pipeline.core.quality import quality_violations
    from pipeline.core.records import Measured

    rng = np.random.default_rng(1)
    reference = rng.normal(size=(50, 8))
    fidelity = fidelity_block({"e": reference}, {"e": reference[::-1].copy()}, None, embedding=True)
    (violation,) = quality_violations(
        Measured(fidelity=fidelity), Constraints(min_cosine=None, min_neighbour_recall=0.9)
    )
    assert violation.constraint == "min_neighbour_recall" and "neighbour recall@10" in violation.message


def detection_grid(rng: np.random.Generator, rows: int = 16, classes: int = 6, anchors: int = 300) -> np.ndarray:
    """A detector's raw output [batch, 4 + classes, anchors]: box coordinates in pixels (0-320) beside
    class probabilities under 0.3, the layout ultralytics exports."""
    boxes = rng.uniform(0, 320, size=(rows, 4, anchors))
    scores = rng.uniform(0, 0.3, size=(rows, classes, anchors)) ** 3
    return np.concatenate([boxes, scores], axis=1).astype(np.float32)


def test_a_grid_is_judged_by_its_score_channels_decisions_and_its_coordinates_error():
    """A detector's [batch, 4 + classes, anchors]: the row's cosine follows the boxes and stays at 0.999
    whatever happens to the scores. Scores that move but never reach the threshold make no decision and
    cannot reject a variant (a BF16 YOLOv8 whose weakest class peaks at 0.02); scores that cross it are
    counted as flips; boxes are judged against their own scale."""
    from pipeline.core.config import Constraints
    from pipeline.core.quality import quality_violations

    rng = np.random.default_rng(0)
    reference = detection_grid(rng)
    below = reference.copy()
    below[:, 4 + 2] += rng.uniform(0, 0.1, size=below[:, 6].shape)  # moved by up to 0.1, all under 0.5
    crossing = reference.copy()
    crossing[:, 4 + 2, :9] = 0.9  # 9 anchors per row now detected as class 2
    moved_boxes = reference.copy()
    moved_boxes[:, 0] += 60.0
    judged = {
        name: fidelity_block({"output0": reference}, {"output0": got}, None)["output0"]
        for name, got in (("below", below), ("crossing", crossing), ("boxes", moved_boxes), ("same", reference))
    }
    assert {block["output_kind"] for block in judged.values()} == {"channels"}
    assert judged["below"]["cosine_min"] > 0.999 and judged["crossing"]["cosine_min"] > 0.99
    assert not quality_violations(Measured(fidelity={"output0": judged["below"]}), Constraints())
    (flips,) = quality_violations(Measured(fidelity={"output0": judged["crossing"]}), Constraints())
    assert flips.constraint == "min_decision_f1" and "axis 1 channel 6" in flips.message
    assert judged["crossing"]["decision_f1"] == 0.0 and judged["crossing"]["decision_flips"] == 16 * 9
    (boxes,) = quality_violations(Measured(fidelity={"output0": judged["boxes"]}), Constraints())
    assert boxes.constraint == "max_channel_error" and "axis 1 channel 0" in boxes.message
    assert judged["same"]["decision_f1"] is None and judged["same"]["channel_error"] == 0.0  # no decision made


def test_a_sigmoid_output_that_flips_4_percent_of_its_decisions_is_rejected_at_a_cosine_over_0999():
    """A transcriber's onset activations [batch, frames, keys]: an INT8-like perturbation keeps every row's
    cosine above 0.999 while 4% of the decisions at 0.5 change; a BF16-like one keeps them."""
    from pipeline.core.config import Constraints
    from pipeline.core.quality import quality_violations

    rng = np.random.default_rng(3)
    logits = rng.normal(-3.0, 2.5, size=(32, 172, 88))
    reference = 1 / (1 + np.exp(-logits))
    near = np.abs(logits) < 0.03  # values within a hair of 0.5 ...
    int8 = 1 / (1 + np.exp(-(logits - 0.06 * np.sign(logits) * near)))  # ... pushed across it
    bf16 = 1 / (1 + np.exp(-(logits * (1 + 1e-3 * rng.standard_normal(logits.shape)))))
    broken = fidelity_block({"onset": reference}, {"onset": int8}, None)["onset"]
    kept = fidelity_block({"onset": reference}, {"onset": bf16}, None)["onset"]
    assert broken["output_kind"] == "probabilities" and "sigmoid" in broken["kind_from"]
    assert broken["cosine_min"] > 0.999 and 0.02 < broken["decision_flips"] / broken["decision_positives"] < 0.05
    assert broken["decision_f1"] < 0.99 < kept["decision_f1"]
    (violation,) = quality_violations(Measured(fidelity={"onset": broken}), Constraints())
    assert (
        violation.constraint == "min_decision_f1"
        and "output onset: F1 of the decisions at 0.5 0.9" in violation.message
    )
    assert "flips against the source's" in violation.message
    assert not quality_violations(Measured(fidelity={"onset": kept}), Constraints())
    stricter = fidelity_block({"onset": reference}, {"onset": bf16}, None, judging=Judging(thresholds={"onset": 0.9}))
    assert stricter["onset"]["decision_threshold"] == 0.9


def test_raw_ctc_logits_are_read_by_argmax_per_position_and_each_string_whole_not_by_their_cosine():
    """CTC logits [batch, positions, classes] (a recogniser's, no softmax in the graph): their values say it
    (both signs, a confident class at most positions, many classes picked), and so can the entry. A variant
    whose cosine falls to 0.96 while every position keeps its character keeps the answers; one that keeps 99%
    of the positions but changes a character in some rows' strings does not (a string is read whole: ddddocr's
    BF16 IR kept 99% of positions and changed 3 of 16 CAPTCHA strings)."""
    from pipeline.core.config import Constraints
    from pipeline.core.quality import quality_violations

    rng = np.random.default_rng(4)
    logits = rng.normal(size=(16, 40, 100))
    logits[np.arange(16)[:, None], np.arange(40)[None], rng.integers(0, 100, size=(16, 40))] += 8.0
    noisy = logits + 0.3 * rng.normal(size=logits.shape)  # the class at every position kept
    found = fidelity_block({"387": logits}, {"387": noisy}, None)
    plain = found["387"]
    assert plain["output_kind"] == "class_logits" and "logits read by argmax" in plain["kind_from"]
    assert plain["cosine_min"] < 0.98 and plain["top1_agreement"] == plain["sequences_kept"] == 1.0
    assert not quality_violations(Measured(fidelity=found), Constraints())  # a cosine would have rejected it
    changed = noisy.copy()
    changed[:3, 7] = logits[:3, 7, ::-1]  # one character of 3 strings of 16
    broken = fidelity_block({"387": logits}, {"387": changed}, None)
    assert broken["387"]["top1_agreement"] > 0.99 and broken["387"]["sequences_kept"] == 13 / 16
    (violation,) = quality_violations(Measured(fidelity=broken), Constraints(min_top1_agreement=0.99))  # params.yaml's
    assert "rows whose class at every position is kept (a sequence read whole) 0.8125 < 0.99" in violation.message
    declared = fidelity_block({"387": logits}, {"387": noisy}, None, judging=Judging(declared={"387": "class_scores"}))
    block = declared["387"]
    assert block["output_kind"] == "class_scores" and block["kind_from"] == "declared (judged_as)"
    assert block["top1_agreement"] == plain["top1_agreement"] and block["sequences_kept"] == 1.0
    assert not quality_violations(Measured(fidelity=declared), Constraints())


def test_probabilities_are_recognised_by_their_values_and_compared_per_position():
    """A softmax however computed (rows summing to 1) is class scores: top-1 agreement, per position for
    [batch, positions, classes] (a text recognizer), where one argmax over the flattened row means nothing."""
    rng = np.random.default_rng(2)
    logits = rng.normal(size=(8, 40, 30)) * 3
    probabilities = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    flipped = probabilities.copy()
    flipped[:, :4] = probabilities[:, :4, ::-1]  # 4 of 40 positions read another character
    block = fidelity_block({"p": probabilities}, {"p": flipped}, None)["p"]
    assert block["output_kind"] == "class_scores" and block["top1_agreement"] == pytest.approx(0.9)
    raw = fidelity_block({"y": logits}, {"y": logits}, None)["y"]
    assert raw["output_kind"] == "values" and raw["top1_agreement"] is None and "neighbour_recall" not in raw


def test_rows_of_unit_norm_are_an_embedding_even_when_every_value_lies_in_0_1():
    """Resemblyzer's speaker embedding (a ReLU, then divided by its norm) is all in [0, 1]: read as a
    sigmoid's, no value passes 0.5, no decision is made, and an INT8 variant at cosine 0.55 passed.
    Unit-norm rows are an embedding: cosine and neighbour recall judge it, and the broken one is rejected."""
    from pipeline.core.config import Constraints
    from pipeline.core.quality import quality_violations

    rng = np.random.default_rng(3)
    vectors = np.maximum(rng.normal(size=(12, 64)), 0)
    reference = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    broken = np.abs(rng.normal(size=reference.shape)) * 0.05 + reference * 0.5
    fidelity = fidelity_block({"e": reference}, {"e": broken}, None)
    block = fidelity["e"]
    assert block["output_kind"] == "embedding" and "unit L2 norm" in block["kind_from"]
    assert block["cosine_min"] < 0.99 and "decision_f1" not in block
    (rejected,) = quality_violations(Measured(fidelity=fidelity), Constraints())  # the default constraints
    assert rejected.constraint == "min_cosine" and "output e: worst row's cosine" in rejected.message
    kept = fidelity_block({"e": reference}, {"e": reference + 1e-4}, None)
    assert not quality_violations(Measured(fidelity=kept), Constraints())
    sigmoid = 1 / (1 + np.exp(-rng.normal(size=(12, 64))))  # not unit norm: probabilities, as before
    assert fidelity_block({"p": sigmoid}, {"p": sigmoid}, None)["p"]["output_kind"] == "probabilities"


def test_the_rank_correlation_is_scipys_spearman_with_ties():
    from scipy.stats import spearmanr

    from pipeline.core.decisions import rank_correlation

    rng = np.random.default_rng(0)
    a = rng.integers(0, 20, 500).astype(float)  # many ties
    b = a + rng.normal(0, 5, 500).round()
    assert rank_correlation(a, b) == pytest.approx(spearmanr(a, b).statistic, abs=1e-12)
    assert rank_correlation(a, -a) == pytest.approx(-1.0)
