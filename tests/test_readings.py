"""Outputs whose decision is no operator in the graph, judged as their users read them (pipeline.core.evaluate):
a detector's grid whose boxes and scores share a scale, raw logits read through a sigmoid or by an argmax,
points in their own units, and outputs no reading fits, judged by their largest error besides their cosine.
Each case is a variant that a cosine passes and the reading rejects, beside one that keeps the decisions."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.core.config import Constraints
from pipeline.core.evaluate import Judging, fidelity_block
from pipeline.core.quality import quality_violations
from pipeline.core.records import Measured


def judged(reference: np.ndarray, output: np.ndarray, name: str = "out", judging: Judging | None = None) -> dict:
    return fidelity_block({name: reference}, {name: output}, judging=judging)[name]


def violations(block: dict, name: str = "out") -> list:
    return quality_violations(Measured(fidelity={name: block}), Constraints())  # the default constraints


def yolox_grid(rng: np.random.Generator, rows: int = 24, anchors: int = 500) -> np.ndarray:
    """A YOLOX-style output [batch, anchors, 6]: box offsets (x, y, w, h) near 0-2.5 beside objectness and a
    class score already through a sigmoid: every channel on one scale, the scores bounded."""
    boxes = rng.uniform(-0.5, 2.5, size=(rows, anchors, 4))
    objectness = 1 / (1 + np.exp(-rng.normal(-3.0, 2.5, size=(rows, anchors, 1))))
    score = rng.uniform(0.2, 1.0, size=(rows, anchors, 1))
    return np.concatenate([boxes, objectness, score], axis=-1)


@pytest.mark.parametrize("layout", ["anchors, channels", "channels, anchors"])
def test_a_grid_whose_boxes_and_scores_share_a_scale_is_rejected_for_3_percent_flipped_objectness(layout):
    rng = np.random.default_rng(0)
    reference = yolox_grid(rng)
    objects = np.flatnonzero(reference[..., 4] >= 0.5)
    flipped = int(0.03 * objects.size)
    int8 = reference.copy()
    int8[..., 4].reshape(-1)[rng.choice(objects, flipped, replace=False)] = 0.45  # 3% of objects lost
    int8[..., :4] += rng.normal(0, 0.01, size=int8[..., :4].shape)
    kept = reference + rng.normal(0, 0.002, size=reference.shape) * (reference[..., :1] > -9)
    kept[..., 4:] = np.clip(kept[..., 4:], 0, 1)
    if layout == "channels, anchors":
        reference, int8, kept = (np.swapaxes(a, 1, 2) for a in (reference, int8, kept))
    axis = 2 if layout == "anchors, channels" else 1
    broken = judged(reference, int8)
    assert (
        broken["output_kind"] == "channels" and "score channels in [0, 1] beside unbounded ones" in broken["kind_from"]
    )
    assert broken["cosine_min"] > 0.98 and broken["decision_flips"] == flipped
    (violation,) = violations(broken)
    assert violation.constraint == "min_decision_f1" and f"axis {axis} channel 4" in violation.message
    assert not violations(judged(reference, kept))


def test_landmarks_5_px_off_at_cosine_09999_are_rejected_naming_the_displacement():
    """A face mesh's 468 (x, y, z) points in the crop's pixels: the cosine of coordinates follows their mean
    position and cannot see one face's points move."""
    rng = np.random.default_rng(1)
    reference = rng.uniform(40, 150, size=(24, 1, 1, 1404))
    moved = reference.copy()
    moved[3, ..., 0:30:3] += 5.0  # ten points of one face 5 px to the right
    kept = reference + rng.normal(0, 0.05, size=reference.shape)
    broken = judged(reference, moved, "landmarks")
    assert broken["output_kind"] == "points" and "its name 'landmarks'" in broken["kind_from"]
    assert broken["cosine_min"] > 0.9999 and broken["point_dims"] == 3
    assert broken["max_displacement"] == pytest.approx(5.0) and broken["worst_point"].startswith("row 3 point ")
    (violation,) = violations(broken, "landmarks")
    assert violation.constraint == "min_rows_within" and broken["rows_within"] == pytest.approx(23 / 24)
    assert "largest displacement 5 at row 3 point" in violation.message
    assert not violations(judged(reference, kept, "landmarks"), "landmarks")
    loose = Judging(declared={"mesh": "points"}, tolerances={"mesh": 6.0})  # the user's tolerance, in pixels
    assert judged(reference, moved, "mesh", loose)["rows_within"] == 1.0


def test_raw_logits_whose_sign_flips_on_2_percent_of_anchors_are_rejected_at_logit_0():
    """A face detector's per-anchor scores [batch, 896, 1] before the package's sigmoid."""
    rng = np.random.default_rng(2)
    reference = rng.normal(-4.0, 3.0, size=(24, 896, 1))
    flipped = reference.copy().reshape(-1)
    nearest = np.argsort(np.abs(flipped))[: int(0.02 * flipped.size)]  # the 2% of anchors closest to 0 ...
    flipped[nearest] *= -1  # ... across it
    flipped = flipped.reshape(reference.shape)
    broken = judged(reference, flipped, "classificators")
    assert broken["output_kind"] == "logits" and broken["decision_logit"] == 0.0
    assert broken["cosine_min"] > 0.999 and broken["decision_flips"] == int(0.02 * reference.size)
    (violation,) = violations(broken, "classificators")
    assert violation.constraint == "min_decision_f1" and "decisions at 0.5 (logit 0)" in violation.message
    assert not violations(judged(reference, reference + 0.001, "classificators"), "classificators")
    at_07 = judged(reference, flipped, "x", Judging(declared={"x": "logits"}, thresholds={"x": 0.7}))
    assert at_07["decision_logit"] == pytest.approx(np.log(0.7 / 0.3))


def test_raw_time_major_logits_are_judged_per_position_by_argmax():
    """A CTC recogniser's [T, batch, classes] as the source returns it rows first ([batch, T, classes])."""
    rng = np.random.default_rng(3)
    time_major = rng.normal(size=(30, 1, 60)) * 2
    time_major[np.arange(30), 0, rng.integers(0, 60, size=30)] += 9.0
    reference = np.swapaxes(time_major, 0, 1)  # rows first
    changed = reference.copy()
    changed[0, :3] = reference[0, :3, ::-1]  # 3 of 30 positions read another character
    block = judged(reference, changed, "output")
    assert block["output_kind"] == "class_logits" and block["top1_agreement"] == pytest.approx(0.9)
    assert block["sequences_kept"] == 0.0  # the one string read whole: changed
    broken = quality_violations(Measured(fidelity={"output": block}), Constraints(min_top1_agreement=0.99))
    assert {violation.constraint for violation in broken} == {"min_top1_agreement"} and len(broken) == 2


def ctc_scores(rng: np.random.Generator, rows: int = 12, positions: int = 40, classes: int = 30) -> np.ndarray:
    """Softmax scores [rows, positions, classes]: each row spells a few characters, each over a run of
    positions with blanks (class 0) between, the winner confident but not alone."""
    logits = rng.normal(size=(rows, positions, classes))
    for row in logits:
        picked = np.zeros(positions, int)
        for start in range(2, positions - 4, 6):
            picked[start : start + 3] = rng.integers(1, classes)
        row[np.arange(positions), picked] += 6.0
    return np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)


def test_a_ctc_recogniser_declared_is_judged_by_its_decoded_string_not_each_position():
    """Half the rows see a character's edge move onto the blank (its string is the same: a position-wise
    reading would reject it); one row reads another character (rejected, naming the decoded string)."""
    rng = np.random.default_rng(8)
    reference = ctc_scores(rng)
    edges = reference.copy()
    for row in edges[::2]:
        row[4] = row[5]  # the first run's last position: its character becomes the blank after it
    ctc = Judging(declared={"rec": "ctc"})
    assert judged(reference, edges, "rec")["sequences_kept"] == 0.5  # read position by position: 6 of 12 changed
    kept = judged(reference, edges, "rec", ctc)
    assert kept["output_kind"] == "ctc" and kept["sequences_kept"] == 1.0 and not violations(kept, "rec")

    misread = edges.copy()
    misread[3, 2:5] = np.roll(misread[3, 2:5], 1, axis=-1)  # row 3's first character: another class
    block = {"rec": judged(reference, misread, "rec", ctc)}
    (violation,) = quality_violations(Measured(fidelity=block), Constraints(min_top1_agreement=0.99))
    assert violation.constraint == "min_top1_agreement" and "decoded string is kept (CTC greedy" in violation.message
    assert "0.9167 < 0.99" in violation.message  # 11 of 12 strings


def test_an_output_no_reading_fits_is_rejected_by_its_largest_error_when_one_value_moves():
    rng = np.random.default_rng(4)
    reference = rng.normal(size=(32, 256))
    moved = reference.copy()
    moved[5, 17] += 0.25 * np.abs(reference).max()  # one value, a quarter of the output's magnitude
    block = judged(reference, moved, "Identity_3")
    assert block["output_kind"] == "values" and "no decision found" in block["kind_from"]
    assert block["cosine_min"] > 0.98  # a cosine alone would pass it
    (violation,) = violations(block, "Identity_3")
    assert violation.constraint == "max_value_error" and "no decision found" in violation.message
    assert not violations(judged(reference, reference + rng.normal(0, 1e-3, reference.shape), "Identity_3"))


def test_a_hidden_state_or_box_offsets_are_neither_a_grid_nor_logits():
    """[batch, tokens, hidden]: no confident class per token, and fewer positions than channels; a detector's
    box and keypoint offsets in pixels [batch, anchors, 16]: confident under a softmax, but too few channels;
    a name that says both points and scores is scores."""
    rng = np.random.default_rng(5)
    hidden = rng.normal(size=(8, 8, 128))
    hidden[..., :3] = rng.uniform(0, 1, size=(8, 8, 3))  # a few dimensions that happen to lie in [0, 1]
    assert judged(hidden, hidden, "last_hidden_state")["output_kind"] == "values"
    offsets = rng.normal(0, 30, size=(8, 896, 16))
    assert judged(offsets, offsets, "regressors")["output_kind"] == "values"
    scores = rng.normal(0, 3, size=(8, 17, 1))
    assert judged(scores, scores, "keypoint_scores")["output_kind"] == "logits"


def test_a_linear_layers_values_in_0_1_are_values_where_the_graph_shows_no_sigmoid():
    """MTCNN's landmarks: ten coordinates in the window's unit square from a Linear layer (a Gemm in the export):
    their values alone read as probabilities judged at 0.5; the graph says they are values (its output name tells
    nothing here). A Sigmoid there keeps the probability reading, and says which operator decided."""
    import onnx
    from onnx import TensorProto, helper

    from pipeline.core.onnx_files import output_producers

    def graph(last: str) -> onnx.ModelProto:
        nodes = [helper.make_node("Gemm", ["x", "w"], ["g"]),
                 helper.make_node(last, ["g"], ["y"]) if last != "Gemm" else helper.make_node("Identity", ["g"], ["y"]),
                 helper.make_node("Reshape", ["y", "shape"], ["onet_out"])]  # fmt: skip
        weights = [helper.make_tensor("w", TensorProto.FLOAT, [4, 10], np.zeros(40)),
                   helper.make_tensor("shape", TensorProto.INT64, [2], [-1, 10])]  # fmt: skip
        return helper.make_model(helper.make_graph(
            nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
            [helper.make_tensor_value_info("onet_out", TensorProto.FLOAT, ["n", 10])], weights))  # fmt: skip

    reference = np.random.default_rng(0).uniform(0.05, 0.95, size=(40, 10))
    assert output_producers(graph("Gemm")) == {"onet_out": "Gemm"}
    assert output_producers(graph("Sigmoid")) == {"onet_out": "Sigmoid"}
    kind, why = Judging(producers=output_producers(graph("Gemm"))).kind(0, "onet_out", reference)
    assert kind == "values" and "the graph's Gemm computes it" in why
    kind, why = Judging(producers={"onet_out": "Sigmoid"}).kind(0, "onet_out", reference)
    assert kind == "probabilities" and "the graph's Sigmoid" in why
    assert Judging().kind(0, "onet_out", reference)[0] == "probabilities"  # no graph known: the values decide


def test_every_reading_is_one_type_an_entry_can_declare_and_the_report_can_state():
    """A reading is one class in pipeline.core.readings: the schema's `judged_as` words are its names (text is told by
    its dtype, never declared), each states its verdict, and a record naming none is judged by the figures it holds."""
    from typing import get_args

    from pipeline.core.config import OutputKindName
    from pipeline.core.readings import READINGS, UNKNOWN, reading

    assert set(get_args(OutputKindName)) == set(READINGS) - {"strings"}
    for name, found in READINGS.items():
        assert found.name == name and found.verdict.format(threshold="0.5", logit="0", tolerance="1")
    assert reading(None) is UNKNOWN and reading("no such reading") is UNKNOWN
    old = {"cosine_min": 0.5, "values_per_row": 8, "top1_agreement": 0.9}  # written before readings were kept
    assert {v.constraint for v in violations(old)} == {"min_cosine"}  # and its top-1 (no floor by default)


def test_values_no_reading_fits_are_scored_by_the_worse_of_cosine_and_largest_error():
    """One value moved by 3 in a row of five: the row's cosine stays 0.40, the largest error relative to the range
    reads worse, and the score is the worse of the two, as the Values reading records it (no kind name read)."""
    from pipeline.core.evaluate import output_fidelity
    from pipeline.core.records import OutputFidelity

    reference = np.random.default_rng(0).normal(size=(8, 5))
    moved = reference.copy()
    moved[0, 0] += 3
    block = OutputFidelity.model_validate(output_fidelity(reference, moved, "values", "test"))
    assert block.error_scored and block.score == min(block.cosine_min, 1.0 - block.max_rel_diff)
    embedding = OutputFidelity.model_validate(output_fidelity(reference, moved, "embedding", "test"))
    assert not embedding.error_scored and embedding.score == embedding.cosine_min
