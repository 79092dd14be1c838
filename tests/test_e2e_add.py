"""A model in one command, then plain `dvc repro`: one model per kind of file `python -m pipeline add`
reads, none of their entries written by hand. A Keras file, a SavedModel folder, a PyTorch factory in
a .py file with its weights and labelled rows, a Hugging Face feature extractor with its text, a tiny
ViT folder, an ONNX sentence encoder with two outputs (the tiny BERT exported by torch.onnx), and a
scikit-learn RandomForest exported by skl2onnx with its defaults (ONNX-ML operators and a ZipMap).
Each reaches a deploy choice, its model file tracked by a .dvc file. The fixed-batch ONNX CNN with an
odd input name and the Hugging Face classifier are tests/test_e2e.py's.

The test keeps each model to one or two variants (the others are covered by the other end-to-end files) and
`models` to what it added: edits to the harness, not to any entry `add` wrote."""

from __future__ import annotations

import itertools
import subprocess
import sys

import numpy as np
import pytest
import yaml

from pipeline.core import registry
from tests.conftest import (
    HF_WORDS,
    write_hf_folder,
    write_params,
    write_sklearn_onnx,
    write_tiny_model,
)
from tests.pipeline_runs import commit_and_repro, fast_project, metrics, read, run

pytestmark = pytest.mark.slow

KEPT = ["onnx_fp32"]  # each model's stages here; INT8 too where a test reads it (the others are covered elsewhere)
INT8 = {"torch_code": "onnx_int8_dynamic", "onnx_encoder": "onnx_int8_dynamic"}
MODELS = ["keras_file", "saved", "torch_code", "hf_encoder", "hf_vit", "onnx_encoder", "forest"]


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


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = fast_project(tmp_path_factory.mktemp("e2e_add") / "project")
    elsewhere = root.parent / "elsewhere"
    texts = elsewhere / "sentences.txt"
    texts.parent.mkdir()
    texts.write_text("".join(f"{a} film {b} {c}\n" for a, b, c in itertools.product(HF_WORDS[5:9], HF_WORDS[9:13],
                                                                                      HF_WORDS[13:])))  # fmt: skip
    forest, iris = write_sklearn_onnx(elsewhere / "forest")
    add = [sys.executable, "-m", "pipeline", "add"]
    run([*add, "keras_file", str(keras_file(elsewhere / "keras"))], root)
    run([*add, "saved", str(savedmodel(elsewhere / "saved"))], root)
    code = write_tiny_model(elsewhere, "mlp")  # net.py:build, its state_dict and labelled rows
    run([*add, "torch_code", f"{code}/net.py:build", "--weights", str(code / "weights.pt"), "--sample",
         str(code / "eval.npz"), "--eval", str(code / "eval.npz")], root)  # fmt: skip
    run([*add, "hf_encoder", str(write_hf_folder(elsewhere / "encoder")), "--eval", str(texts), "--dim", "seq=8"],
        root)  # fmt: skip
    run([*add, "hf_vit", str(write_hf_folder(elsewhere / "vit", "ViTForImageClassification"))], root)
    run([*add, "onnx_encoder", str(onnx_encoder(elsewhere / "onnx")), "--dim", "sequence=8"], root)
    shown = run([*add, "forest", str(forest), "--eval", str(iris)], root)
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["models"] = MODELS
    for name in MODELS[:-1]:  # the forest's applicable variants are onnx_fp32 and onnx_opt: the registry's data
        kept = [*KEPT, INT8.get(name)]
        params["catalog"][name]["skip"] = [variant for variant in registry.VARIANTS if variant not in kept]
    write_params(root, params)
    return root, commit_and_repro(root), shown


def test_every_added_model_reaches_a_deploy_choice_with_its_file_under_dvc(project):
    root, _, _ = project
    for name in MODELS:
        assert read(root / "reports" / "export" / f"{name}.json")["status"] == "ok", name
        choice = read(root / "reports" / "selection" / f"{name}.json")
        assert choice["status"] == "ok" and choice["chosen"], (name, choice.get("reason"))
        assert read(root / "deploy" / name / "manifest.json")["variant"] == choice["chosen"]
        assert list((root / "models" / name).rglob("*.dvc")), f"{name}: no .dvc file"
    status = subprocess.run(["dvc", "status"], cwd=root, capture_output=True, text=True, check=True).stdout
    # the always-run env stage aside, the model files and every stage are as `dvc repro` left them
    assert "models/" not in status and "changed outs" not in status, status


def test_an_encoder_with_two_outputs_has_fidelity_on_each(project):
    root, _, _ = project
    m = metrics(root, "onnx_encoder", "onnx_int8_dynamic")
    assert m["status"] == "ok", m["reason"]
    assert set(m["fidelity"]) == {"last_hidden_state", "pooler_output"}
    # an ONNX file says nothing of what its outputs are for: no neighbour recall until `task: embedding`
    assert all(block.get("neighbour_recall") is None for block in m["fidelity"].values())
    entry = yaml.safe_load((root / "params.yaml").read_text())["catalog"]["onnx_encoder"]
    assert entry["inputs"]["input_ids"]["high"] == len(HF_WORDS) and entry["dims"] == {"sequence": 8}


def test_a_feature_extractor_folder_measures_on_its_own_held_out_text(project):
    root, _, _ = project
    export = read(root / "reports" / "export" / "hf_encoder.json")
    assert export["held_out"]["scoring"]["origin"].startswith("models/hf_encoder/eval.npz: ")
    assert metrics(root, "hf_encoder", "onnx_fp32")["fidelity"]["embedding"]["cosine_min"] > 0.999
    shown = run([sys.executable, "-m", "pipeline", "predict", str(root / "deploy" / "hf_encoder"),
                 "--text=the film was good", "--output", "e.npy"], root)  # fmt: skip
    assert np.load(root / "e.npy").shape == (1, 32), shown


def test_vit_keras_and_savedmodel_files_run_their_generated_rows(project):
    root, _, _ = project
    assert metrics(root, "hf_vit", "onnx_fp32")["fidelity"]["logits"]["top1_agreement"] == 1.0
    for name in ("keras_file", "saved"):
        assert read(root / "reports" / "export" / f"{name}.json")["parity"] == "ok"


def test_a_pytorch_factory_is_measured_on_its_labelled_rows(project):
    root, _, _ = project
    m = metrics(root, "torch_code", "onnx_int8_dynamic")
    assert m["status"] == "ok" and m["accuracy"]["metric"] == "accuracy" and m["accuracy"]["value"] is not None


def test_a_scikit_learn_forest_with_zipmap_runs_on_onnx_runtime_only(project):
    """skl2onnx's defaults: the ZipMap read as a tensor of probabilities, accuracy from labels on held-out
    rows; OpenVINO, FP16 and INT8 are not applicable (no stage), listed once with the reason."""
    root, _, shown = project
    assert "ZipMap of class probabilities" in shown and "ONNX-ML operators (TreeEnsembleClassifier)" in shown
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
