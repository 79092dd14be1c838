"""Accuracy and fidelity against the FP32 source."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.core.evaluate import accuracy_block, fidelity_block, predictions, task_metric
from pipeline.core.records import Measured


def test_predictions_by_metric_and_shape():
    np.testing.assert_array_equal(predictions(np.array([[0.2], [0.7]]), "binary_accuracy"), [0, 1])
    np.testing.assert_array_equal(predictions(np.array([[0.1, 0.9, 0.0], [3, 1, 2]]), "accuracy"), [1, 0])
    assert predictions(np.array([[0.3], [0.9]]), "none") is None  # a lone regression output has no class


def test_task_metric():
    logits = np.array([[0, 1], [1, 0], [0, 1], [0, 1]], dtype=np.float32)
    assert task_metric("accuracy", logits, np.array([1, 0, 0, 1])) == pytest.approx(0.75)
    assert task_metric("accuracy", logits, None) is None
    assert task_metric("none", logits, np.array([1, 0, 0, 1])) is None


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
    # The old figure, argmax of the flattened output, calls the destroyed variant half right:
    flat = lambda a: a.reshape(len(a), -1).argmax(1)  # noqa: E731
    assert (flat(broken["hidden"]) == flat(hidden)).mean() < 0.5


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
    labels = np.array([1, 0, 1, 1])
    reference = {"y": np.array([[0, 1], [1, 0], [0, 1], [1, 0]], dtype=np.float32)}  # 3/4 right
    variant = {"y": np.array([[0, 1], [1, 0], [1, 0], [1, 0]], dtype=np.float32)}  # 2/4 right
    block = accuracy_block("accuracy", labels, reference, variant)
    assert block["metric"] == "accuracy"
    assert block["value"] == pytest.approx(0.5) and block["delta"] == pytest.approx(-0.25)


def test_without_labels_there_is_no_task_metric():
    reference = {"y": np.array([[0, 1], [1, 0]], dtype=np.float32)}
    block = accuracy_block("accuracy", None, reference, {"y": np.array([[0, 1], [0, 1]], dtype=np.float32)})
    assert block == {"metric": "none", "value": None, "source_value": None, "delta": None}


def test_scalar_and_negligible_outputs_do_not_fake_a_low_cosine():
    reference = np.array([[0.9], [0.0], [0.2], [1e-30]])  # a sigmoid that underflowed to 0 in one runtime
    output = np.array([[0.9], [1e-38], [0.2], [0.0]])
    block = fidelity_block({"p": reference}, {"p": output}, "binary_accuracy")["p"]
    assert block["cosine_mean"] == pytest.approx(1.0) and block["cosine_min"] == pytest.approx(1.0)
    assert block["top1_agreement"] == 1.0
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


def test_a_mixed_scale_grid_with_wrecked_class_scores_is_rejected_by_its_channel_while_the_row_cosine_holds():
    from pipeline.core.config import Constraints
    from pipeline.core.quality import quality_violations
    from pipeline.core.records import Measured

    rng = np.random.default_rng(0)
    reference = detection_grid(rng)
    wrecked = reference.copy()
    wrecked[:, 4 + 2] += rng.uniform(0, 0.1, size=wrecked[:, 6].shape)  # one class's scores moved by up to 0.1
    good = reference * (1 + 1e-3 * rng.standard_normal(reference.shape)).astype(np.float32)  # BF16-like noise
    broken = fidelity_block({"output0": reference}, {"output0": wrecked}, None)["output0"]
    kept = fidelity_block({"output0": reference}, {"output0": good}, None)["output0"]
    assert broken["cosine_min"] > 0.999  # the boxes dominate every row's norm: the cosine cannot see it
    assert broken["output_kind"] == kept["output_kind"] == "channels"
    assert broken["worst_channel"].startswith("axis 1 channel 6:") and broken["channel_error"] > 0.3
    assert kept["channel_error"] < 0.01
    assert "neighbour_recall" not in broken  # a grid is no embedding
    (violation,) = quality_violations(Measured(fidelity={"output0": broken}), Constraints())
    assert violation.constraint == "max_channel_error" and "output0 axis 1 channel 6" in violation.message
    assert not quality_violations(Measured(fidelity={"output0": kept}), Constraints())


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
