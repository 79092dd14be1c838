"""A model in one command, then plain `dvc repro`, in one project: one model per kind of file `python -m
pipeline add` reads, none of their entries written by hand, each reaching a deploy choice with its model
file tracked by a .dvc file.

- A Keras file, a SavedModel folder, a PyTorch factory in a .py file with its weights and labelled rows,
  a tiny ViT folder, an ONNX sentence encoder with two
  outputs (the tiny BERT exported by torch.onnx), and a scikit-learn RandomForest exported by skl2onnx
  with its defaults (ONNX-ML operators and a ZipMap).
- Models as other exporters write them (tests/foreign_graphs.py): a stateful audio-like model, a
  detector's raw grid, a classifier with its softmax written out.
- A real pretrained Hugging Face feature extractor as it is shared (all-MiniLM-L6-v2, shipped inside a
  package) with its text: measured on its own held-out sentences, an INT8 deployed or the reason none was.
- TFLite files written by TensorFlow's converter (tests/model_forms.py): a float one at a fixed batch of
  1, a full-integer one; each against the file as it ships in LiteRT (the tflite baseline).
- scikit-learn models saved with joblib (tests/model_forms.py), on --trust-pickle: a text pipeline whose
  input is strings (predict and the served protocol answer as scikit-learn does), a numeric one.
- Gradient-boosted trees (tests/model_forms.py): an XGBoost JSON file and a pickled LGBMClassifier, each against
  its library's own predict, with the ONNX-ML export and treelite's compiled trees judged on split-threshold rows.
- A PyTorch factory that dies natively (abort()) in the export's batch probe: it fails alone, with the
  signal, and the same `dvc repro` builds every other model.

The fixed-batch ONNX CNN with an odd input name and the Hugging Face classifier are tests/test_e2e.py's.
Slow (about 4 minutes on 2 cores: fifteen `add` commands in one interpreter, each loading its framework,
and one `dvc repro` of 15 models): one project for every added model, so DVC, the env probe and the report
are paid once. Each model keeps one or two variants
(KEPT; the others are covered by tests/test_e2e.py and each pass's own test) and `models` is what was
added: edits to the harness, not to any entry `add` wrote."""

from __future__ import annotations

import itertools
import random
import subprocess
import sys

import numpy as np
import pytest
import yaml

from tests.conftest import (
    HF_WORDS,
    write_hf_folder,
    write_params,
    write_sklearn_onnx,
    write_tiny_model,
)
from tests.foreign_graphs import grid, jaxlike, stateful
from tests.helpers import aborting_net
from tests.model_forms import reviews, write_boosted, write_numeric_estimator, write_text_pipeline, write_tflite
from tests.pipeline_runs import add_each, commit_and_repro, fast_project, keeping, metrics, read, run

pytestmark = pytest.mark.slow

# Each model's stages here (the forest's are the registry's: onnx_fp32 and onnx_opt); INT8 where a test reads it
KEPT = {
    "keras_file": ["onnx_fp32"],
    "saved": ["onnx_fp32"],
    "torch_code": ["onnx_fp32"],
    "hf_vit": ["onnx_fp32"],
    "onnx_encoder": ["onnx_fp32"],
    "stateful": ["onnx_fp32", "openvino_int8"],  # OpenVINO: the If on the scalar, specialised
    "grid": ["onnx_fp32", "onnx_int8_static"],
    "jaxlike": ["onnx_fp32", "onnx_int8_dynamic"],
    "minilm": ["onnx_fp32", "openvino_int8_dynamic"],
    "tfl_float": ["tflite", "onnx_fp32", "openvino_fp32"],  # OpenVINO: from the .tflite file itself
    "tfl_int8": ["tflite", "onnx_fp32", "onnx_int8_static", "openvino_int8"],  # INT8 already: skipped, said why
    "aborts": ["onnx_fp32"],  # dies natively (SIGABRT) in the export's batch probe: fails alone
    "reviews": ["sklearn", "onnx_fp32"],  # a scikit-learn text pipeline: strings in
    "iris_joblib": ["sklearn", "onnx_fp32"],
    "xgb_file": ["xgboost", "onnx_fp32", "treelite"],  # gradient-boosted trees: the library's file, and pickled
    "lgbm_pickle": ["lightgbm", "onnx_fp32", "treelite"],
}
FAILS = ["aborts"]
TREES = {"xgb_file": ("xgboost", "file", "binary"), "lgbm_pickle": ("lightgbm", "pickle", "classes")}
MODELS = [*KEPT, "forest"]
FOREIGN = ["stateful", "grid", "jaxlike"]
PRETRAINED_INT8 = KEPT["minilm"][1:]


def keras_file(folder):
    import keras

    keras.utils.set_random_seed(0)
    inputs = keras.Input((6,), name="features")
    model = keras.Model(inputs, keras.layers.Dense(3)(keras.layers.Dense(16, activation="relu")(inputs)))
    folder.mkdir(parents=True)
    model.save(folder / "dense.keras")
    return folder / "dense.keras"


def savedmodel(folder):
    import tensorflow as tf

    class Linear(tf.Module):
        def __init__(self) -> None:
            self.w = tf.Variable(tf.random.stateless_normal([6, 3], seed=[0, 1]))

        @tf.function(input_signature=[tf.TensorSpec([None, 6], tf.float32, name="features")])
        def serve(self, features):
            return {"scores": tf.matmul(features, self.w)}

    module = Linear()
    tf.saved_model.save(module, str(folder), signatures={"serving_default": module.serve})
    return folder


def onnx_encoder(folder):
    """The tiny BERT folder exported as another team would: two outputs, batch and sequence open."""
    import torch
    import transformers

    class BothOutputs(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = transformers.BertModel.from_pretrained(write_hf_folder(folder / "hf")).eval()

        def forward(self, input_ids, attention_mask, token_type_ids):
            out = self.bert(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
            return out.last_hidden_state, out.pooler_output

    ids = torch.tensor([[2, 5, 9, 3]])
    names = ["input_ids", "attention_mask", "token_type_ids"]
    axes = {name: {0: "batch", 1: "sequence"} for name in names}
    torch.onnx.export(
        BothOutputs(), (ids, torch.ones_like(ids), torch.zeros_like(ids)), folder / "encoder.onnx", dynamo=False,
        input_names=names, output_names=["last_hidden_state", "pooler_output"],
        dynamic_axes=axes | {"last_hidden_state": {0: "batch", 1: "sequence"}, "pooler_output": {0: "batch"}},
    )  # fmt: skip
    return folder / "encoder.onnx"


def sentences(n: int = 200) -> list[str]:
    """Varied short sentences: near neighbours share a subject, a verb or an object."""
    subjects = ["The cat", "A dog", "My neighbour", "The old man", "Our teacher", "The child", "A doctor", "The pilot"]
    verbs = ["reads", "buys", "paints", "finds", "sells", "repairs"]
    objects = ["a red car", "the morning paper", "an old guitar", "fresh bread", "a small boat", "the broken clock"]
    lines = [f"{s} {v} {o}." for s, v, o in itertools.product(subjects, verbs, objects)]
    random.Random(0).shuffle(lines)
    return lines[:n]


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """The project after `add` of every model and one `dvc repro`; what each `add` printed, by name."""
    from models.minilm_l6_pretrained.net import files

    root = fast_project(tmp_path_factory.mktemp("e2e_add") / "project")
    elsewhere = root.parent / "elsewhere"
    elsewhere.mkdir()
    pretrained_text = elsewhere / "pretrained.txt"
    pretrained_text.write_text("\n".join(sentences()) + "\n")
    forest, iris = write_sklearn_onnx(elsewhere / "forest")
    code = write_tiny_model(elsewhere, "mlp")  # net.py:build, its state_dict and labelled rows
    added = {
        "keras_file": [str(keras_file(elsewhere / "keras"))],
        "saved": [str(savedmodel(elsewhere / "saved"))],
        "torch_code": [f"{code}/net.py:build", "--weights", str(code / "weights.pt"), "--sample",
                       str(code / "eval.npz"), "--eval", str(code / "eval.npz")],
        "hf_vit": [str(write_hf_folder(elsewhere / "vit", "ViTForImageClassification"))],
        "onnx_encoder": [str(onnx_encoder(elsewhere / "onnx")), "--dim", "sequence=8"],
        "forest": [str(forest), "--eval", str(iris)],
        "minilm": [str(files()), "--eval", str(pretrained_text), "--dim", "seq=32"],
    }  # fmt: skip
    added |= {name: [str(write_tflite(elsewhere / name, name == "tfl_int8"))] for name in ("tfl_float", "tfl_int8")}
    added["aborts"] = [f"{aborting_net(elsewhere / 'aborts', 'x.shape[0] == 1')}:build", "--input", "x=12"]
    for name, write in (("reviews", write_text_pipeline), ("iris_joblib", write_numeric_estimator)):
        path, rows = write(elsewhere / name)
        added[name] = [str(path), "--eval", str(rows), "--trust-pickle"]
    for name, (library, form, task) in TREES.items():
        path, rows = write_boosted(elsewhere / name, library, form, task)
        added[name] = [str(path), "--eval", str(rows), *(["--trust-pickle"] if form == "pickle" else [])]
    for name, write in (("stateful", stateful), ("grid", grid), ("jaxlike", jaxlike)):
        path, rows = write(elsewhere / name)
        added[name] = [str(path), "--eval", str(rows)]
    shown = add_each(root, added)
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["models"] = MODELS
    for name, kept in KEPT.items():
        params["catalog"][name]["skip"] = keeping(params["catalog"][name]["source"], *kept)
    write_params(root, params)
    return root, commit_and_repro(root), shown


def test_every_added_model_reaches_a_deploy_choice_with_its_file_under_dvc(project):
    """Slow (its project, about 5 min: every form `add` takes, through `dvc repro`). The only test that takes each
    form a model ships in (ONNX files from other exporters, Keras and SavedModel files, checkpoints with code,
    Hugging Face folders, TFLite, scikit-learn pickles) from one `add` command to a deploy choice through DVC."""
    root, _, _ = project
    for name in (m for m in MODELS if m not in FAILS):
        assert read(root / "reports" / "export" / f"{name}.json")["status"] == "ok", name
        choice = read(root / "reports" / "selection" / f"{name}.json")
        assert choice["status"] == "ok" and choice["chosen"], (name, choice.get("reason"))
        assert read(root / "deploy" / name / "manifest.json")["variant"] == choice["chosen"]
        assert list((root / "models" / name).rglob("*.dvc")), f"{name}: no .dvc file"
    status = subprocess.run(["dvc", "status"], cwd=root, capture_output=True, text=True, check=True).stdout
    # the always-run env stage aside, the model files and every stage are as `dvc repro` left them
    assert "models/" not in status and "changed outs" not in status, status


def test_a_model_that_aborts_natively_fails_alone_with_its_signal(project):
    """Its forward calls abort() at one row: the export's process dies in the batch probe's first call, the
    model gets a failed record naming the signal, and plain `dvc repro` built every other model."""
    root, _, _ = project
    export = read(root / "reports" / "export" / "aborts.json")
    assert export["status"] == "failed"
    assert "while the batch probe ran batch 1: process killed by SIGABRT" in export["reason"]
    assert read(root / "reports" / "selection" / "aborts.json")["status"] != "ok"
    assert (
        metrics(root, "aborts", "onnx_fp32")["status"] == "failed"
        and "SIGABRT" in metrics(root, "aborts", "onnx_fp32")["reason"]
    )


def test_tflite_files_go_in_with_one_add_and_are_judged_against_the_file_as_it_ships(project):
    """A float file at a fixed batch of 1 and a full-integer one: the tflite baseline runs each as it ships,
    the ONNX export and OpenVINO's own TFLite front end are measured beside it, and the deploy folder predicts."""
    root, _, shown = project
    assert "a full-integer (INT8) TFLite model (image scale" in shown["tfl_int8"]
    assert "its baseline is the file itself in the LiteRT interpreter" in shown["tfl_float"]
    assert "batch fixed to 1 by the file" in shown["tfl_float"]
    for name in ("tfl_float", "tfl_int8"):
        baseline = metrics(root, name, "tflite")
        assert baseline["status"] == "ok" and baseline["runtime_settings"]["delegate"].startswith("XNNPACK")
        assert metrics(root, name, "onnx_fp32")["fidelity"], name
        assert read(root / "reports" / "export" / f"{name}.json")["exporter"].startswith("tf2onnx")
    openvino = metrics(root, "tfl_float", "openvino_fp32")
    assert openvino["status"] == "ok" and openvino["build"]["frontend"] == "source"
    assert metrics(root, "tfl_int8", "tflite")["build"]["full_integer"] is True
    for variant in ("onnx_int8_static", "openvino_int8"):  # each says why, before any process started
        skipped = metrics(root, "tfl_int8", variant)
        assert skipped["kind"] == "skipped-not-applicable", variant
        assert skipped["reason"].startswith("tfl_int8 is already a full-integer (INT8) TFLite model (image scale")
        assert f"{variant} would quantize it again" in skipped["reason"]
    image = np.random.default_rng(0).random((1, 16, 16, 3), dtype=np.float32)
    np.savez(root / "image.npz", image=image)
    run([sys.executable, "-m", "pipeline", "predict", str(root / "deploy" / "tfl_float"), "image.npz", "--output",
         "out.npz"], root)  # fmt: skip
    assert {k: v.shape for k, v in np.load(root / "out.npz").items()} == {
        "output_0": (1, 8, 1),
        "output_1": (1, 1, 1, 12),
    }


def test_scikit_learn_models_go_in_as_saved_and_are_timed_against_scikit_learn(project):
    """A text pipeline (strings in) and a numeric one, each saved with joblib: the sklearn baseline and the
    ONNX export measured side by side, fidelity on their held-out rows; the text model's deploy folder answers
    as scikit-learn itself does, through predict and the served protocol (REST JSON and binary, gRPC)."""
    import joblib
    import tritonclient.grpc as grpc_client
    import tritonclient.http as http_client

    from pipeline.serve import server

    root, _, shown = project
    assert "its input 'text' str ['batch', 1] (a text vectorizer first: strings)" in shown["reviews"]
    for name in ("reviews", "iris_joblib"):
        export = read(root / "reports" / "export" / f"{name}.json")
        assert export["parity"] == "ok" and export["exporter"].startswith("skl2onnx"), name
        baseline = metrics(root, name, "sklearn")
        assert baseline["status"] == "ok" and baseline["runtime_settings"]["estimator"] == "Pipeline", name
        assert metrics(root, name, "onnx_fp32")["fidelity"]["probabilities"], name
    texts, _ = reviews(5, seed=7)
    want = joblib.load(root / "models" / "reviews" / "reviews.joblib").predict_proba(texts[:, 0])
    np.savez(root / "texts.npz", text=texts)
    deploy = root / "deploy" / "reviews"
    run([sys.executable, "-m", "pipeline", "predict", str(deploy), "texts.npz", "--output", "p.npz"], root)
    assert np.abs(np.load(root / "p.npz")["probabilities"] - want).max() < 1e-5
    running = server.start(deploy)
    try:
        as_bytes = texts.astype(object)
        got = {}
        for binary in (False, True):
            tensor = http_client.InferInput("text", list(texts.shape), "BYTES")
            tensor.set_data_from_numpy(as_bytes, binary_data=binary)
            reply = http_client.InferenceServerClient(running.url).infer("reviews", [tensor])
            got[f"rest {'binary' if binary else 'json'}"] = reply.as_numpy("probabilities")
        tensor = grpc_client.InferInput("text", list(texts.shape), "BYTES")
        tensor.set_data_from_numpy(as_bytes)
        got["grpc"] = (
            grpc_client.InferenceServerClient(running.grpc_url).infer("reviews", [tensor]).as_numpy("probabilities")
        )
    finally:
        running.stop()
    for how, probabilities in got.items():
        assert np.abs(probabilities - want).max() < 1e-5, how


def test_tree_ensembles_go_in_as_they_ship_and_are_timed_against_their_library(project):
    """An XGBoost JSON file and a pickled LGBMClassifier: each baseline runs the library's own predict, the ONNX-ML
    export and the compiled trees keep every class on the scoring rows and on the split-threshold rows, the
    contest states each speed-up against the library, and the deploy folder answers as the library does."""
    import joblib

    root, _, shown = project
    assert "its booster saved as lightgbm_classes.txt" in shown["lgbm_pickle"]
    for name, (library, _, _) in TREES.items():
        assert read(root / "reports" / "export" / f"{name}.json")["exporter"].startswith("onnxmltools"), name
        baseline = metrics(root, name, library)
        assert baseline["runtime_settings"]["library"].startswith(library), name
        for variant in KEPT[name]:
            record = metrics(root, name, variant)
            assert record["status"] == "ok", (name, variant, record["reason"])
            assert record["fidelity"]["probabilities"]["top1_agreement"] == 1.0, (name, variant)
            edges = record["edge_rows"]
            assert edges["rows"] > 0 and edges["fidelity"]["probabilities"]["top1_agreement"] == 1.0, (name, variant)
        choice = read(root / "reports" / "selection" / f"{name}.json")
        assert choice["baseline"] == library and choice["chosen"] in {library, *choice["speedups"]}, name
    x = np.load(root / "models" / "lgbm_pickle" / "eval.npz")["X"][:7]
    np.savez(root / "rows.npz", X=x)
    run([sys.executable, "-m", "pipeline", "predict", str(root / "deploy" / "lgbm_pickle"), "rows.npz", "--output",
         "trees.npz"], root)  # fmt: skip
    pickled = next((root.parent / "elsewhere" / "lgbm_pickle").glob("*.joblib"))
    want = joblib.load(pickled).predict_proba(x)
    got = np.load(root / "trees.npz")["probabilities"]
    assert (got.argmax(1) == want.argmax(1)).all() and np.abs(got - want).max() < 1e-5


def test_an_encoder_with_two_outputs_has_fidelity_on_each(project):
    root, _, _ = project
    m = metrics(root, "onnx_encoder", "onnx_fp32")
    assert m["status"] == "ok", m["reason"]
    assert set(m["fidelity"]) == {"last_hidden_state", "pooler_output"}
    # an ONNX file says nothing of what its outputs are for: no neighbour recall until `task: embedding`
    assert all(block.get("neighbour_recall") is None for block in m["fidelity"].values())
    entry = yaml.safe_load((root / "params.yaml").read_text())["catalog"]["onnx_encoder"]
    assert entry["inputs"]["input_ids"]["high"] == len(HF_WORDS) and entry["dims"] == {"sequence": 8}


def test_vit_keras_and_savedmodel_files_run_their_generated_rows(project):
    root, _, _ = project
    assert metrics(root, "hf_vit", "onnx_fp32")["fidelity"]["logits"]["top1_agreement"] == 1.0
    for name in ("keras_file", "saved"):
        assert read(root / "reports" / "export" / f"{name}.json")["parity"] == "ok"


def test_a_pytorch_factory_is_measured_on_its_labelled_rows(project):
    root, _, _ = project
    m = metrics(root, "torch_code", "onnx_fp32")
    assert m["status"] == "ok" and m["accuracy"]["metric"] == "accuracy" and m["accuracy"]["value"] is not None


def test_a_scikit_learn_forest_with_zipmap_runs_on_onnx_runtime_only(project):
    """skl2onnx's defaults: the ZipMap read as a tensor of probabilities, accuracy from labels on held-out
    rows; OpenVINO, FP16 and INT8 are not applicable (no stage), listed once with the reason."""
    root, _, shown = project
    assert "ZipMap of class probabilities" in shown["forest"]
    assert "ONNX-ML operators (TreeEnsembleClassifier)" in shown["forest"]
    for variant in ("onnx_fp32", "onnx_opt"):
        m = metrics(root, "forest", variant)
        assert m["status"] == "ok", m["reason"]
        assert m["accuracy"]["value"] > 0.9 and m["accuracy"]["delta"] == 0
        assert m["fidelity"]["output_probability"]["top1_agreement"] == 1.0
    assert not (root / "reports" / "details" / "forest" / "onnx_int8_dynamic.json").exists()
    left_out = read(root / "reports" / "selection" / "forest.json")["not_applicable"]
    assert "ONNX-ML operators" in left_out["onnx_int8_dynamic"] and "openvino cannot read" in left_out["openvino_int8"]
    probabilities = run([sys.executable, "-m", "pipeline", "predict", str(root / "deploy" / "forest"),
                         "models/forest/eval.npz", "--output", "p.npz"], root)  # fmt: skip
    with np.load(root / "p.npz") as got:
        assert got["output_probability"].shape == (75, 3), probabilities
        np.testing.assert_allclose(got["output_probability"].sum(axis=1), 1.0, rtol=1e-5)


def test_every_input_form_goes_in_with_one_command_and_reaches_a_deploy_choice(project):
    root, _, shown = project
    entries = yaml.safe_load((root / "params.yaml").read_text())["catalog"]
    assert entries["stateful"]["inputs"]["sr"] == {"shape": [], "dtype": "int64", "value": 16000.0}
    assert entries["stateful"]["inputs"]["state"]["batch_axis"] == 1
    assert "state: batch axis 1 (its one open axis" in shown["stateful"]
    assert entries["grid"]["inputs"]["images"]["shape"] == ["batch", 3, "p2o_DynamicDimension_1",
                                                            "p2o_DynamicDimension_2"]  # fmt: skip
    assert entries["jaxlike"]["task"] == "classification"  # the written-out softmax, read off the graph
    for name in FOREIGN:
        choice = read(root / "reports" / "selection" / f"{name}.json")
        assert choice["status"] == "ok" and choice["chosen"], (name, choice.get("reason"))


def test_a_state_with_its_batch_axis_second_is_measured_and_predicted_in_the_models_layout(project):
    root, _, _ = project
    source = read(root / "artifacts" / "stateful" / "source" / "source.json")
    assert source["output_batch_axes"] == {"stateN": 1}
    for variant in KEPT["stateful"]:
        m = metrics(root, "stateful", variant)
        assert m["status"] == "ok", (variant, m["reason"])
        assert set(m["fidelity"]) == {"y", "stateN"}
    assert metrics(root, "stateful", "onnx_fp32")["fidelity"]["stateN"]["cosine_min"] > 0.9999
    with np.load(root / "models" / "stateful" / "eval.npz") as data:
        rows = {"x": data["x"][:5], "state": data["state"][:, :5], "sr": data["sr"]}
    np.savez(root / "five.npz", **rows)
    run([sys.executable, "-m", "pipeline", "predict", str(root / "deploy" / "stateful"), "five.npz", "--output",
         "out.npz"], root)  # fmt: skip
    with np.load(root / "out.npz") as out:
        assert out["y"].shape == (5, 1) and out["stateN"].shape == (2, 5, 4)  # the model's own layout back
    np.savez(root / "other_rate.npz", **(rows | {"sr": np.array(8000)}))
    refused = subprocess.run(
        [sys.executable, "-m", "pipeline", "predict", str(root / "deploy" / "stateful"), "other_rate.npz"],
        cwd=root, capture_output=True, text=True,
    )  # fmt: skip
    assert refused.returncode == 2 and "a scalar input passes one value on every call" in refused.stderr


def test_a_grid_is_judged_channel_by_channel_and_a_written_out_softmax_by_top1(project):
    root, _, _ = project
    block = metrics(root, "grid", "onnx_int8_static")["fidelity"]["output0"]
    assert block["output_kind"] == "channels" and block["worst_channel"].startswith("axis 1 channel ")
    assert block.get("neighbour_recall") is None
    export = read(root / "reports" / "export" / "grid.json")
    assert export["constants_as_initializers"].startswith("1 Constant nodes' tensors made initializers")
    probabilities = metrics(root, "jaxlike", "onnx_int8_dynamic")["fidelity"]["target_label"]
    assert probabilities["output_kind"] == "class_scores" and probabilities["top1_agreement"] is not None


def test_integer_inputs_keep_the_range_their_eval_data_holds(project):
    """Bytes 0-256 in the eval data: predict refuses 100000 in one line, as it does a token id."""
    root, _, shown = project
    assert "bytes: integers in [0, 257) (the eval data's range)" in shown["jaxlike"]
    np.savez(root / "bad_bytes.npz", bytes=np.full((1, 16), 100000, np.int32))
    refused = subprocess.run([sys.executable, "-m", "pipeline", "predict", str(root / "deploy" / "jaxlike"),
                              "bad_bytes.npz"], cwd=root, capture_output=True, text=True)  # fmt: skip
    assert refused.returncode == 2 and "holds 100000: values must lie in [0, 257)" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1


def test_a_pretrained_encoder_folder_deploys_int8_or_says_why_not(project):
    """A feature extractor's folder and its text: measured on its own held-out sentences (the export as
    good as the folder: cosine 0.999), INT8 deployed or each one's reason."""
    root, _, shown = project
    assert "task feature-extraction" in shown["minilm"] and "200 rows, no labels" in shown["minilm"]
    assert (root / "models" / "minilm" / "hf" / "model.safetensors.dvc").is_file()
    held_out = read(root / "reports" / "export" / "minilm.json")["held_out"]
    assert held_out["scoring"]["origin"].startswith("models/minilm/eval.npz: ")
    assert held_out["calibration"]["rows_in_scoring"] == held_out["validation"]["rows_in_scoring"] == 0
    assert metrics(root, "minilm", "onnx_fp32")["fidelity"]["embedding"]["cosine_min"] > 0.999
    choice = read(root / "reports" / "selection" / "minilm.json")
    assert choice["status"] == "ok"
    for variant in PRETRAINED_INT8:
        m = metrics(root, "minilm", variant)
        assert m["status"] == "ok", m["reason"]
        assert m["fidelity"]["embedding"]["neighbour_recall"] is not None
        assert 0 < m["accuracy"]["eval_samples"] <= held_out["scoring"]["rows"]  # held-out sentences, unlabelled
    if choice["chosen"] not in PRETRAINED_INT8:  # no INT8 deployed: each one's reason is a constraint or the contest
        assert all(choice["rejected"][variant] for variant in PRETRAINED_INT8), choice["rejected"]
    page = (root / "reports" / "report" / "minilm.md").read_text()
    assert "on held-out rows: models/minilm/eval.npz: " in page


def test_the_deployed_encoder_embeds_text(project):
    root, _, _ = project
    deploy = root / "deploy" / "minilm"
    run([sys.executable, "-m", "pipeline", "predict", str(deploy), "--text=A dog finds fresh bread.",
         "--text=The pilot repairs a small boat.", "--output", "e.npy"], root)  # fmt: skip
    embeddings = np.load(root / "e.npy")
    assert embeddings.shape == (2, 384) and np.isfinite(embeddings).all()
