"""scikit-learn models as they are saved (joblib, pickle): `add` loads one only on --trust-pickle; the source's
reference is the estimator's own predict_proba; skl2onnx's export (strings in, probabilities out) agrees with
it in ONNX Runtime, through the locale rescue where the machine lacks the one a StringNormalizer asks for.
Through `dvc repro`, predict and serve: tests/test_e2e_add.py."""

from __future__ import annotations

import joblib
import numpy as np
import onnx
import onnxruntime as ort
import pytest

from pipeline.core import onnx_files
from pipeline.core.config import ExportConfig, ModelConfig
from pipeline.core.errors import ModelFileError
from pipeline.core.inputs import check_inputs
from pipeline.prepare.sources import load_source
from tests.model_forms import reviews, write_numeric_estimator, write_text_pipeline
from tests.test_add import params_of, project, run_add  # noqa: F401 - `project` is a fixture


def test_a_pickle_is_refused_without_trust_pickle_and_taken_with_it(project, tmp_path, monkeypatch, capsys):  # noqa: F811
    path, rows = write_numeric_estimator(tmp_path / "elsewhere")
    assert run_add(project, monkeypatch, "iris", str(path), "--eval", str(rows)) == 2
    assert "loading it runs code from the file. Add it with --trust-pickle" in capsys.readouterr().err
    assert "iris" not in params_of(project)["catalog"] and not (project / "models" / "iris").exists()
    assert run_add(project, monkeypatch, "iris", str(path), "--eval", str(rows), "--trust-pickle") == 0
    printed = capsys.readouterr().out
    assert "a Pipeline loaded on --trust-pickle; its input 'X' float64 ['batch', 4]" in printed
    assert "its baseline is the estimator itself (variant sklearn)" in printed
    entry = params_of(project)["catalog"]["iris"]
    assert entry["source"] == "sklearn" and entry["inputs"] == {"X": {"shape": ["batch", 4], "dtype": "float64"}}
    assert "onnx_ml" in entry  # skl2onnx writes LinearClassifier, an ONNX-ML operator


@pytest.fixture(scope="module")
def text_model(tmp_path_factory):
    root = tmp_path_factory.mktemp("sklearn")
    path, rows = write_text_pipeline(root / "models" / "reviews")
    config = ModelConfig(source="sklearn", file=path.name, inputs={"text": {"shape": ["batch", 1], "dtype": "str"}})
    return root, config, np.load(rows)


def test_a_text_pipeline_exports_strings_in_and_probabilities_out_as_scikit_learn_answers(text_model, tmp_path):
    root, config, rows = text_model
    source = load_source("reviews", config, root)
    assert source.output_names == ["probabilities"]
    want = joblib.load(root / "models" / "reviews" / "reviews.joblib").predict_proba(rows["text"][:, 0])
    assert np.allclose(source.predict({"text": rows["text"]})["probabilities"], want, atol=1e-6)
    report = source.export_onnx(tmp_path / "model.onnx", ExportConfig())
    assert report["exporter"].startswith("skl2onnx") and report["estimator"] == "Pipeline"
    session = ort.InferenceSession(str(tmp_path / "model.onnx"), providers=["CPUExecutionProvider"])
    assert [(i.name, i.type) for i in session.get_inputs()] == [("text", "tensor(string)")]
    assert [o.name for o in session.get_outputs()] == ["probabilities"]  # no label, no ZipMap
    (got,) = session.run(None, {"text": rows["text"]})
    assert np.abs(got - want).max() < 1e-5
    assert (got.argmax(1) == want.argmax(1)).all()


def test_a_locale_the_machine_lacks_is_set_to_one_it_has_and_said(text_model, tmp_path):
    """The real ONNX Runtime error, made by asking for a locale no machine has."""
    root, config, rows = text_model
    load_source("reviews", config, root).export_onnx(tmp_path / "model.onnx", ExportConfig())
    model = nowhere_locale(onnx.load(str(tmp_path / "model.onnx")))
    assert onnx_files.string_locales(model) == ["xx_NOWHERE.UTF-8"]
    record = onnx_files.with_available_locale(model)
    assert record["rescue"] == "string_normalizer_locale" and "Failed to construct locale" in record["seen"]
    assert record["locale"] in onnx_files.LOCALES and record["nodes"] == 1
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    assert session.run(None, {"text": rows["text"][:2]})[0].shape == (2, 2)
    assert onnx_files.with_available_locale(model) is None  # it opens now: nothing to rescue


def nowhere_locale(model: onnx.ModelProto) -> onnx.ModelProto:
    onnx_files.set_locale(model, "xx_NOWHERE.UTF-8")  # ONNX Runtime cannot open it on any machine
    return model


def test_an_onnx_file_whose_locale_the_machine_lacks_goes_in_through_the_rescue(text_model, tmp_path):
    """As the issue met it: a user's own skl2onnx file, a source of its own (source: onnx). Its session, its
    export and the serving files' locale line all come from the rescued graph."""
    root, config, rows = text_model
    load_source("reviews", config, root).export_onnx(tmp_path / "exported.onnx", ExportConfig())
    folder = tmp_path / "models" / "text_onnx"
    folder.mkdir(parents=True)
    onnx.save(nowhere_locale(onnx.load(str(tmp_path / "exported.onnx"))), str(folder / "model.onnx"))
    with pytest.raises(Exception, match="Failed to construct locale"):
        ort.InferenceSession(str(folder / "model.onnx"), providers=["CPUExecutionProvider"])
    as_file = ModelConfig(
        source="onnx", file="model.onnx", inputs=config.inputs, outputs=["probabilities"], onnx_ml=True
    )
    source = load_source("text_onnx", as_file, tmp_path)
    assert source.predict({"text": rows["text"][:3]})["probabilities"].shape == (3, 2)
    report = source.export_onnx(tmp_path / "model.onnx", ExportConfig())
    (rescue,) = report["rescues"]
    assert rescue["rescue"] == "string_normalizer_locale" and rescue["locale"] in onnx_files.LOCALES
    assert onnx_files.string_locales(onnx.load(str(tmp_path / "model.onnx"))) == [rescue["locale"]]


def test_text_comes_in_as_bytes_or_strings_and_anything_else_is_one_line():
    specs = {"text": ModelConfig(source="sklearn", file="m.joblib",
                                 inputs={"text": {"shape": ["batch", 1], "dtype": "str"}}).inputs["text"]}  # fmt: skip
    texts, _ = reviews(3, seed=2)
    as_bytes = np.array([[t.encode()] for t in texts[:, 0]], dtype=object)
    assert check_inputs({"text": as_bytes}, specs, "request")["text"].tolist() == texts.tolist()
    assert check_inputs({"text": texts.astype(object)}, specs, "request")["text"].dtype.kind == "U"
    with pytest.raises(ModelFileError, match=r"request: array 'text' holds something other than UTF-8 text"):
        check_inputs({"text": np.array([[b"\xff\xfe"]], dtype=object)}, specs, "request")
    with pytest.raises(ModelFileError, match=r"array 'text' holds something other than UTF-8 text: a int"):
        check_inputs({"text": np.array([[3]], dtype=object)}, specs, "request")


def test_a_text_model_takes_its_eval_rows_as_jsonl_text(project, tmp_path, monkeypatch, capsys):  # noqa: F811
    import json

    path, _ = write_text_pipeline(tmp_path / "elsewhere")
    texts, labels = reviews(12, seed=3)
    rows = tmp_path / "reviews.jsonl"
    rows.write_text(
        "".join(json.dumps({"text": t, "label": int(y)}) + "\n" for t, y in zip(texts[:, 0], labels, strict=True))
    )
    assert run_add(project, monkeypatch, "reviews_jsonl", str(path), "--eval", str(rows), "--trust-pickle") == 0
    capsys.readouterr()
    saved = np.load(project / "models" / "reviews_jsonl" / "eval.npz")
    assert saved["text"].tolist() == texts.tolist() and saved["labels"].tolist() == labels.tolist()
    assert params_of(project)["catalog"]["reviews_jsonl"]["metric"] == "accuracy"  # labelled: a classifier
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "a fine film", "label": "good"}\n')
    assert run_add(project, monkeypatch, "reviews_bad", str(path), "--eval", str(bad), "--trust-pickle") == 2
    assert "a label that is not an integer class" in capsys.readouterr().err


class Unconvertible:
    """A fitted estimator skl2onnx has no converter for (as YASA's LGBMClassifier was before trees went in)."""

    n_features_in_ = 4

    def predict(self, x):
        return np.zeros(len(x))


def test_an_estimator_skl2onnx_refuses_is_one_error_naming_the_users_file(project, tmp_path, monkeypatch, capsys):  # noqa: F811
    path = tmp_path / "elsewhere" / "odd.joblib"
    path.parent.mkdir()
    joblib.dump(Unconvertible(), path)
    assert run_add(project, monkeypatch, "odd", str(path), "--trust-pickle") == 2
    error = capsys.readouterr().err
    assert f"{path}: skl2onnx could not convert the Unconvertible" in error, error
    assert "odd" not in params_of(project)["catalog"]
