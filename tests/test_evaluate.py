"""Accuracy and fidelity against the FP32 source."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.evaluate import accuracy_block, compare, predictions, task_metric


def test_predictions_by_metric_and_shape():
    np.testing.assert_array_equal(predictions(np.array([[0.2], [0.7]]), "binary_accuracy"), [0, 1])
    np.testing.assert_array_equal(predictions(np.array([[0.1, 0.9, 0.0], [3, 1, 2]]), "accuracy"), [1, 0])
    assert predictions(np.array([[0.3], [0.9]]), "none") is None  # a lone regression output has no class


def test_task_metric():
    logits = np.array([[0, 1], [1, 0], [0, 1], [0, 1]], dtype=np.float32)
    assert task_metric("accuracy", logits, np.array([1, 0, 0, 1])) == pytest.approx(0.75)
    assert task_metric("accuracy", logits, None) is None
    assert task_metric("none", logits, np.array([1, 0, 0, 1])) is None


def test_compare_reports_worst_difference_and_agreement():
    reference = {"y": np.array([[0.0, 1.0], [1.0, 0.0]])}
    outputs = {"y": np.array([[0.1, 0.8], [0.2, 0.9]])}
    result = compare(reference, outputs, "accuracy")
    assert result["max_abs_diff"] == pytest.approx(0.9)
    assert result["top1_agreement"] == pytest.approx(0.5)


def test_compare_rejects_missing_or_reshaped_outputs():
    with pytest.raises(ValueError, match="missing"):
        compare({"y": np.zeros((2, 2))}, {"z": np.zeros((2, 2))}, "accuracy")
    with pytest.raises(ValueError, match="shape"):
        compare({"y": np.zeros((2, 2))}, {"y": np.zeros((2, 3))}, "accuracy")


def test_accuracy_block_delta_against_source():
    labels = np.array([1, 0, 1, 1])
    reference = {"y": np.array([[0, 1], [1, 0], [0, 1], [1, 0]], dtype=np.float32)}  # 3/4 right
    variant = {"y": np.array([[0, 1], [1, 0], [1, 0], [1, 0]], dtype=np.float32)}  # 2/4 right
    block = accuracy_block("accuracy", labels, reference, variant)
    assert block["metric"] == "accuracy"
    assert block["value"] == pytest.approx(0.5) and block["delta"] == pytest.approx(-0.25)
    assert block["top1_agreement"] == pytest.approx(0.75)


def test_without_labels_the_metric_is_fidelity():
    reference = {"y": np.array([[0, 1], [1, 0]], dtype=np.float32)}
    block = accuracy_block("accuracy", None, reference, {"y": np.array([[0, 1], [0, 1]], dtype=np.float32)})
    assert block["metric"] == "fidelity"
    assert block["value"] == pytest.approx(0.5) and block["delta"] == pytest.approx(-0.5)
