"""predict checks values, not only shapes: ids outside the vocabulary, masks that are not 0/1 and
NaN/Inf are one line and exit 2 on every runtime, before the runtime sees them (OpenVINO's Gather
answers zeros for an id past the vocabulary, both runtimes count a negative id from the end)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from pipeline import runtimes
from pipeline.cli import main
from pipeline.core import layout
from pipeline.core.data import generate_inputs
from pipeline.core.errors import ModelFileError
from pipeline.core.files import write_json
from pipeline.prepare.check import check_models
from pipeline.serve.predict import load
from tests.tiny_deploy import SEQ, SPECS, VARIANTS, VOCAB, deploy_folders, tok_params


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return deploy_folders(tmp_path_factory.mktemp("tok"))


def batch(rows: int = 32, seq: int = 64) -> dict[str, np.ndarray]:
    """Valid inputs like a tokenizer's: padded rows, some sentence pairs."""
    return generate_inputs(SPECS, rows, 1, {"seq": seq})


def predict(folder: Path, inputs: dict[str, np.ndarray], tmp_path: Path, capsys, *flags: str) -> tuple[int, str]:
    """`python -m pipeline predict` in this process: exit code and stderr."""
    np.savez(tmp_path / "x.npz", **inputs)
    code = main(["predict", str(folder), str(tmp_path / "x.npz"), "--output", str(tmp_path / "y.npz"),
                 "--threads", "1", *flags])  # fmt: skip
    return code, capsys.readouterr().err


def with_value(name: str, row: int, value: float, position: slice | int = 0) -> dict[str, np.ndarray]:
    inputs = batch()
    inputs[name][row, position] = value
    return inputs


def without_attention(row: int) -> dict[str, np.ndarray]:
    inputs = batch()
    inputs["attention_mask"][row] = 0
    return inputs


CASES = {
    "id past the vocabulary": (
        with_value("input_ids", 3, 1_000_000, slice(None)),
        "array 'input_ids' row 3 holds 1000000: token ids must lie in [0, 50), the vocabulary",
    ),
    "negative id": (
        with_value("input_ids", 0, -5, slice(None)),
        "array 'input_ids' row 0 holds -5: token ids must lie in [0, 50), the vocabulary",
    ),
    "mask value": (
        with_value("attention_mask", 5, 2),
        "array 'attention_mask' row 5 holds 2: a mask holds only 0 and 1",
    ),
    "empty mask": (without_attention(7), "array 'attention_mask' row 7 is all 0: a mask must attend to some position"),
    "token type": (
        with_value("token_type_ids", 2, 2),
        "array 'token_type_ids' row 2 holds 2: token type ids must lie in [0, 2), the type vocabulary",
    ),
    "nan": (with_value("scale", 4, np.nan), "array 'scale' row 4 holds nan: inputs must be finite (predict --allow-"),
    "inf": (with_value("scale", 9, -np.inf), "array 'scale' row 9 holds -inf: inputs must be finite (predict --allow-"),
}


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("case", CASES)
def test_bad_values_are_one_line_exit_2_and_nothing_written(deployed, tmp_path, capsys, variant, case):
    inputs, message = CASES[case]
    code, err = predict(deployed[variant], inputs, tmp_path, capsys)
    assert code == 2 and err.startswith(f"error: {tmp_path / 'x.npz'}: {message}"), err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "y.npz").exists()


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_valid_batch_predicts_exactly_as_the_runtime_does(deployed, tmp_path, capsys, variant):
    inputs = batch()
    code, err = predict(deployed[variant], inputs, tmp_path, capsys)
    assert code == 0, err
    runtime, entry, config = VARIANTS[variant]
    expected = runtimes.load(runtime, deployed[variant] / entry, 1, config).run(inputs)["embedding"]
    with np.load(tmp_path / "y.npz") as got:
        np.testing.assert_array_equal(got["embedding"], expected)
    unchecked = load(deployed[variant], threads=1, check_values=False)(inputs)["embedding"]
    np.testing.assert_array_equal(unchecked, expected)


@pytest.mark.parametrize("variant", VARIANTS)
def test_allow_nonfinite_lets_nan_through_and_keeps_the_other_checks(deployed, tmp_path, capsys, variant):
    code, err = predict(deployed[variant], CASES["nan"][0], tmp_path, capsys, "--allow-nonfinite")
    assert code == 0, err
    with np.load(tmp_path / "y.npz") as got:
        assert np.isnan(got["embedding"][4]).all() and np.isfinite(np.delete(got["embedding"], 4, axis=0)).all()
    predictor = load(deployed[variant], allow_nonfinite=True)
    with pytest.raises(ModelFileError, match=r"row 0 holds -5: token ids"):
        predictor(CASES["negative id"][0])


@pytest.mark.parametrize("variant", VARIANTS)
def test_check_values_false_hands_the_runtime_what_it_would_misread(deployed, variant):
    """What the checks guard against: both runtimes answer a negative id, without a word."""
    outputs = load(deployed[variant], check_values=False)(CASES["negative id"][0])
    assert np.isfinite(outputs["embedding"]).all()


def test_a_manifest_from_before_the_bounds_runs_the_checks_it_can(deployed, tmp_path):
    old = shutil.copytree(deployed["onnx_fp32"], tmp_path / "old")
    manifest = json.loads((old / layout.MANIFEST).read_text())
    del manifest["token_bounds"]
    write_json(old / layout.MANIFEST, manifest)
    predictor = load(old)
    assert predictor(batch())["embedding"].shape == (32, 8)
    with pytest.raises(ModelFileError, match=r"row 0 holds -5: token ids must be >= 0 \(the vocabulary is not rec"):
        predictor(CASES["negative id"][0])


@pytest.mark.parametrize("field", ["eval_data", "calib_data"])
def test_check_refuses_a_data_file_with_ids_outside_the_vocabulary(deployed, tmp_path, field):
    folder = tmp_path / "models" / "tok"
    folder.mkdir(parents=True)
    shutil.copy(deployed["onnx_fp32"] / "model.onnx", folder / "model.onnx")
    params = tok_params()
    np.savez(folder / "eval.npz", **batch(8, SEQ))
    np.savez(folder / "bad.npz", **with_value("input_ids", 6, VOCAB))
    entry = params.catalog["tok"].model_copy(update={"eval_data": "eval.npz", field: "bad.npz"})
    params = params.model_copy(update={"catalog": {"tok": entry}})
    assert check_models(params, tmp_path) == [
        f"{folder / 'bad.npz'} (params.yaml: catalog.tok.{field}): array 'input_ids' row 6 holds 50: "
        "token ids must lie in [0, 50), the vocabulary"
    ]
