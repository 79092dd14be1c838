"""Input data: the user's .npz files are checked against the spec; our own files round-trip."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.core.config import InputSpec
from pipeline.core.data import DataSet, batches, concat, generate_inputs
from pipeline.core.errors import ModelFileError
from pipeline.core.inputs import check_inputs, load_user_data

SPECS = {"x": InputSpec(shape=["batch", 3, 4]), "ids": InputSpec(shape=["batch", 5], dtype="int64", low=0, high=7)}


def test_generated_inputs_follow_spec_and_seed():
    a, b = generate_inputs(SPECS, 6, seed=1), generate_inputs(SPECS, 6, seed=1)
    assert a["x"].shape == (6, 3, 4) and a["x"].dtype == np.float32
    assert a["ids"].dtype == np.int64 and a["ids"].min() >= 0 and a["ids"].max() < 7
    np.testing.assert_array_equal(a["x"], b["x"])
    assert not np.array_equal(a["x"], generate_inputs(SPECS, 6, seed=2)["x"])


def test_dataset_round_trip_keeps_names_that_are_not_valid_keys(tmp_path):
    data = DataSet({"input:0/x": np.ones((2, 3), np.float32)}, {"out.1": np.zeros((2, 1))}, np.array([0, 1]), "here")
    data.save(tmp_path / "d.npz")
    loaded = DataSet.load(tmp_path / "d.npz")
    assert list(loaded.inputs) == ["input:0/x"] and list(loaded.outputs) == ["out.1"]
    np.testing.assert_array_equal(loaded.labels, [0, 1])
    assert loaded.origin == "here" and len(loaded) == 2 and len(loaded.head(1)) == 1


def test_batches_and_concat_cover_every_row():
    arrays = {"x": np.arange(10).reshape(10, 1)}
    chunks = list(batches(arrays, 4))
    assert [len(c["x"]) for c in chunks] == [4, 4, 2]
    np.testing.assert_array_equal(concat(chunks)["x"], arrays["x"])


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        ({"ids": np.zeros((2, 5), np.int64)}, "missing array 'x'"),
        (
            {"x": np.zeros((2, 3, 5), np.float32), "ids": np.zeros((2, 5), np.int64)},
            "has shape (2, 3, 5), expected (batch, 3, 4) (axis 2 is fixed)",
        ),
        (
            {"x": np.zeros((2, 3, 4), np.complex64), "ids": np.zeros((2, 5), np.int64)},
            "has dtype complex64, expected float32",
        ),
        ({"x": np.zeros((2, 3, 4), np.float32), "ids": np.zeros((3, 5), np.int64)}, "same, non-zero number of samples"),
    ],
)
def test_check_inputs_rejects_mismatches(arrays, message):
    with pytest.raises(ModelFileError, match=r"data\.npz") as error:
        check_inputs(arrays, SPECS, "data.npz")
    assert message in str(error.value)


def test_check_inputs_casts_safe_dtypes():
    checked = check_inputs({"x": np.zeros((2, 3, 4), np.float64), "ids": np.zeros((2, 5), np.int32)}, SPECS, "d")
    assert checked["x"].dtype == np.float32 and checked["ids"].dtype == np.int64


def test_a_narrowing_cast_never_wraps_an_id_into_the_vocabulary():
    """int64 2**32 + 3 cast to int32 is 3: a plausible token id. It is refused before any value check."""
    specs = {"ids": InputSpec(shape=["batch", 2], dtype="int32")}
    fits = check_inputs({"ids": np.array([[1, 2]], np.int64)}, specs, "d.npz")
    assert fits["ids"].dtype == np.int32
    with pytest.raises(ModelFileError, match=r"d\.npz: array 'ids' holds 4294967299, outside int32's range"):
        check_inputs({"ids": np.array([[1, 2**32 + 3]], np.int64)}, specs, "d.npz")


def test_user_data_errors_name_file_and_field(tmp_path):
    field = "catalog.m.eval_data"
    with pytest.raises(ModelFileError, match=rf"missing.npz \(params.yaml: {field}\): file not found"):
        load_user_data(tmp_path / "missing.npz", SPECS, field)
    corrupt = tmp_path / "corrupt.npz"
    corrupt.write_bytes(b"not a zip")
    with pytest.raises(ModelFileError, match=r"corrupt.npz .*not a readable .npz file"):
        load_user_data(corrupt, SPECS, field)
    short = tmp_path / "short.npz"
    np.savez(short, x=np.zeros((4, 3, 4), np.float32), ids=np.zeros((4, 5), np.int64), labels=np.zeros(3))
    with pytest.raises(ModelFileError, match=r"'labels' has shape \(3,\); a label array has one row per input"):
        load_user_data(short, SPECS, field)


def test_user_data_loads_inputs_and_labels(tmp_path):
    path = tmp_path / "eval.npz"
    np.savez(path, x=np.ones((4, 3, 4), np.float32), ids=np.ones((4, 5), np.int64), labels=np.arange(4))
    data = load_user_data(path, SPECS, "f")
    assert len(data) == 4 and list(data.inputs) == ["x", "ids"] and data.origin == str(path)


def test_user_data_values_are_checked_against_the_declared_vocabulary(tmp_path):
    """A clamped or wrapped id would corrupt every figure measured on the rows, without failing."""
    specs = {
        "ids": InputSpec(shape=["batch", 4], dtype="int64", kind="token_ids", high=10),
        "mask": InputSpec(shape=["batch", 4], dtype="int64", kind="attention_mask"),
    }
    ids, mask = np.ones((4, 4), np.int64), np.ones((4, 4), np.int64)
    ids[2, 1] = 10
    np.savez(tmp_path / "eval.npz", ids=ids, mask=mask)
    with pytest.raises(ModelFileError) as error:
        load_user_data(tmp_path / "eval.npz", specs, "catalog.m.eval_data")
    assert str(error.value) == (
        f"{tmp_path / 'eval.npz'} (params.yaml: catalog.m.eval_data): array 'ids' row 2 holds 10: "
        "token ids must lie in [0, 10), the vocabulary"
    )
    assert len(load_user_data(tmp_path / "eval.npz", specs, "f", bounds={"ids": 11})) == 4  # the model's own
