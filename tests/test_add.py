"""`python -m pipeline add`: an ONNX file in one command, read off the file, checked, nothing half-written."""

from __future__ import annotations

import difflib
import subprocess
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
import yaml
from onnx import TensorProto, helper, numpy_helper

from pipeline.cli import main
from pipeline.core.config import load_params
from pipeline.prepare.add.flags import Flags, parse_dims
from pipeline.prepare.add.inspect.onnx_file import inspect_onnx
from pipeline.prepare.add.params_text import with_entry
from pipeline.stagefile import missing_stages
from tests.conftest import copy_project, models_from, write_fixed_batch_onnx, write_hf_folder, write_tiny_model
from tests.foreign_graphs import written_out_softmax


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A copy of the repository, a git and DVC repo as a user's clone is (`dvc add` needs both)."""
    root = copy_project(tmp_path_factory.mktemp("add") / "project")
    for cmd in (["git", "init", "-q"], ["dvc", "init", "-q"]):
        subprocess.run(cmd, cwd=root, check=True)
    return root


def run_add(root: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> int:
    monkeypatch.chdir(root)
    return main(["add", *args])


def odd_name_file(folder: Path) -> Path:
    """A fixed-batch CNN from another exporter whose input is called `gpu_0/data_0`, weights external."""
    path = write_fixed_batch_onnx(folder)
    model = onnx.load(str(path))
    model.graph.input[0].name = "gpu_0/data_0"
    for node in model.graph.node:
        node.input[:] = ["gpu_0/data_0" if i == "image" else i for i in node.input]
    onnx.save_model(model, str(path), save_as_external_data=True, location="model.onnx.data", size_threshold=0)
    return path


def encoder_file(folder: Path) -> Path:
    """A tiny sentence encoder: token ids into an embedding of 50 rows, a mask, two outputs."""
    rng = np.random.default_rng(0)
    table = numpy_helper.from_array(rng.standard_normal((50, 8)).astype(np.float32), "embeddings")
    nodes = [
        helper.make_node("Gather", ["embeddings", "input_ids"], ["tokens"]),
        helper.make_node("Cast", ["attention_mask"], ["mask_f"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["mask_f", "axis"], ["mask3"]),
        helper.make_node("Mul", ["tokens", "mask3"], ["last_hidden_state"]),
        helper.make_node("ReduceMean", ["last_hidden_state"], ["pooled"], axes=[1], keepdims=0),
    ]
    axis = numpy_helper.from_array(np.array([2], np.int64), "axis")
    ids = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch_size", "sequence"]) for n in
           ("input_ids", "attention_mask")]  # fmt: skip
    outputs = [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch_size", "sequence", 8]),
               helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["batch_size", 8])]  # fmt: skip
    graph = helper.make_graph(nodes, "encoder", ids, outputs, [table, axis])
    folder.mkdir(parents=True, exist_ok=True)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # what exporters write: `add` loads the file in ONNX Runtime (IR 13 at most)
    onnx.save(model, folder / "encoder.onnx")
    return folder / "encoder.onnx"


def odd_axes_file(folder: Path, axes: list, scalar: bool = False) -> Path:
    """A graph whose input `x` has the axes an exporter wrote (paddle2onnx's dotted names, `?`, -1,
    tf2onnx's unk__N), reduced over its spatial axes; with a scalar input `scale` when asked."""
    dims = [helper.make_tensor_value_info("x", TensorProto.FLOAT, axes)]
    spatial = list(range(2, len(axes)))
    nodes = [helper.make_node("ReduceMean", ["x"], ["y"], axes=spatial, keepdims=0) if spatial else
             helper.make_node("Identity", ["x"], ["y"])]  # fmt: skip
    if scalar:
        dims.append(helper.make_tensor_value_info("scale", TensorProto.FLOAT, []))
        nodes = [helper.make_node("Mul", ["x", "scale"], ["xs"]), nodes[0]]
        nodes[1].input[0] = "xs"
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [axes[0], axes[1]])
    graph = helper.make_graph(nodes, "odd_axes", dims, [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # what exporters write: `add` loads the file in ONNX Runtime (IR 13 at most)
    for dim, axis in zip(model.graph.input[0].type.tensor_type.shape.dim, axes, strict=True):
        if axis == -1:  # some exporters write -1 where a dim is open
            dim.Clear()
            dim.dim_value = -1
    folder.mkdir(parents=True, exist_ok=True)
    onnx.save(model, folder / "model.onnx")
    return folder / "model.onnx"


@pytest.mark.parametrize(
    ("axes", "flags", "expected"),
    [  # the file's axes, the --dim flags a user writes from them, the entry's shape and dims
        (["p2o.DynamicDimension.0", 3, "p2o.DynamicDimension.1", "p2o.DynamicDimension.2"],
         ["p2o.DynamicDimension.1=48", "p2o.DynamicDimension.2=320"],
         (["batch", 3, "p2o_DynamicDimension_1", "p2o_DynamicDimension_2"],
          {"p2o_DynamicDimension_1": 48, "p2o_DynamicDimension_2": 320})),
        (["?", 3, "?", -1], ["x_2=8", "x_3=9"], (["batch", 3, "x_2", "x_3"], {"x_2": 8, "x_3": 9})),
        (["unk__10", 3, "unk__11", "height width"], ["height width=5"],
         (["batch", 3, "unk__11", "height_width"], {"unk__11": 128, "height_width": 5})),
    ],
)  # fmt: skip
def test_add_takes_axes_by_the_names_the_file_uses(tmp_path, axes, flags, expected):
    inferred = inspect_onnx("x", odd_axes_file(tmp_path, axes), Flags(dims=parse_dims(flags)))
    assert (inferred.entry.inputs["x"].shape, inferred.entry.dims) == expected
    if "." in axes[2]:  # renamed: the note says both names
        assert any("the file calls it 'p2o.DynamicDimension.1'" in note for note in inferred.notes)


def test_add_takes_the_axes_the_eval_data_fixes(project, tmp_path, monkeypatch, capsys):
    """No --dim: the eval data's 48x320 images set the axes, where a default of 128 used to contradict them."""
    path = odd_axes_file(tmp_path, ["p2o.DynamicDimension.0", 3, "p2o.DynamicDimension.1", "p2o.DynamicDimension.2"])
    np.savez(tmp_path / "eval.npz", x=np.random.default_rng(0).random((6, 3, 48, 320), dtype=np.float32))
    assert run_add(project, monkeypatch, "paddle_like", str(path), "--eval", str(tmp_path / "eval.npz")) == 0
    entry = params_of(project)["catalog"]["paddle_like"]
    assert "dims" not in entry and entry["eval_data"] == "eval.npz"
    assert "axis p2o_DynamicDimension_1: 48 from the eval data" in capsys.readouterr().out


def params_of(root: Path) -> dict:
    return yaml.safe_load((root / "params.yaml").read_text())


def test_add_reads_a_fixed_batch_file_with_an_odd_input_name(project, tmp_path, monkeypatch, capsys):
    source = odd_name_file(tmp_path / "elsewhere")
    before = (project / "params.yaml").read_text()
    assert run_add(project, monkeypatch, "odd_cnn", str(source)) == 0
    entry = params_of(project)["catalog"]["odd_cnn"]
    assert entry == {"source": "onnx", "file": "model.onnx", "inputs": {"gpu_0/data_0": {"shape": [1, 3, 16, 16],
                     "dtype": "float32"}}}  # fmt: skip
    assert params_of(project)["models"][-1] == "odd_cnn"
    after = (project / "params.yaml").read_text().splitlines()
    changes = [line for line in difflib.ndiff(before.splitlines(), after) if line[:1] in "+-"]
    assert changes and all(line.startswith("+ ") for line in changes)  # only added lines: comments and layout kept
    assert "+   - odd_cnn" in changes and "+   odd_cnn:" in changes
    folder = project / "models" / "odd_cnn"
    assert {p.name for p in folder.iterdir()} >= {"model.onnx.dvc", "model.onnx.data.dvc", ".gitignore"}
    assert not missing_stages(load_params(project / "params.yaml"), project)  # the stage files were written
    staged = yaml.safe_load((project / "variants/onnx_fp32/dvc.yaml").read_text())["stages"]["build"]["foreach"]
    assert "odd_cnn" in staged
    assert "odd_cnn" not in yaml.safe_load((project / "variants/torch_eager/dvc.yaml").read_text())["stages"]["build"][
        "foreach"]  # fmt: skip
    printed = capsys.readouterr().out
    assert "batch fixed to 1" in printed and "run it: dvc repro" in printed
    status = subprocess.run(["dvc", "status", "models/odd_cnn/model.onnx.dvc"], cwd=project, capture_output=True,
                            text=True, check=True).stdout  # fmt: skip
    assert "up to date" in status


def test_params_edit_keeps_other_layouts():
    """A flow-style models list, unindented list items (yaml.safe_dump's): each gets the name appended."""
    entry = {"source": "onnx", "file": "m.onnx", "inputs": {"x": {"shape": ["batch", 3], "dtype": "float32"}}}
    for text in ("models: [a]  # run these\ncatalog:\n  a: {source: onnx}\n", "models:\n- a\ncatalog:\n  a: {}\n"):
        written = yaml.safe_load(with_entry(text, "b", entry))
        assert written["models"] == ["a", "b"] and written["catalog"]["b"] == entry
    assert "# run these" in with_entry("models: [a]  # run these\ncatalog:\n  a: {}\n", "b", entry)


def test_add_finds_token_inputs_their_vocabulary_and_symbolic_axes(project, tmp_path, monkeypatch, capsys):
    source = encoder_file(tmp_path)
    assert run_add(project, monkeypatch, "tiny_encoder", str(source), "--dim", "sequence=16") == 0
    entry = params_of(project)["catalog"]["tiny_encoder"]
    assert entry["inputs"] == {
        "input_ids": {"shape": ["batch", "sequence"], "dtype": "int64", "kind": "token_ids", "high": 50},
        "attention_mask": {"shape": ["batch", "sequence"], "dtype": "int64", "kind": "attention_mask"},
    }
    assert entry["dims"] == {"sequence": 16}
    assert "rows of the embedding table" in capsys.readouterr().out


def bad_zipmap_file(folder: Path) -> Path:
    """A graph whose output is a sequence of tensors, as skl2onnx's ZipMap outputs are not tensors."""
    folder.mkdir(parents=True, exist_ok=True)
    nodes = [helper.make_node("SequenceConstruct", ["x"], ["probabilities"])]
    out = helper.make_value_info("probabilities", helper.make_sequence_type_proto(
        helper.make_tensor_type_proto(TensorProto.FLOAT, ["batch", 3])))  # fmt: skip
    graph = helper.make_graph(
        nodes, "zip", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])], [out]
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), folder / "zip.onnx")
    return folder / "zip.onnx"


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("missing", "not found"),
        ("corrupt", "not a valid ONNX model"),
        ("taken", "the name is taken"),
        ("bad_name", "a model name is letters"),
        ("folder", "not a model `add` reads"),
        ("sequence_output", "is a sequence_type, not a tensor"),
        ("no_vocabulary", "pass --vocab N"),
        ("unknown_dim", "no such symbolic axis"),
        ("eval_mismatch", "--eval"),
        ("no_head", "its weights have no text-classification head"),
        ("hf_without_weights", "no weights file"),
        ("code_without_shapes", "pass --sample rows.npz"),
        ("weights_do_not_fit", "does not fit models.m_weights_do_not_fit.net:build"),
        ("not_a_factory", "returned int"),
        ("scalar_input", "is a scalar (shape [])"),
    ],
)
def test_bad_input_is_one_line_and_leaves_nothing(project, tmp_path, monkeypatch, capsys, case, message):
    good = encoder_file(tmp_path / "good")
    paths = {"missing": tmp_path / "nope.onnx", "folder": tmp_path, "sequence_output": bad_zipmap_file(tmp_path / "z")}
    (tmp_path / "corrupt.onnx").write_bytes(b"not a model")
    paths["corrupt"] = tmp_path / "corrupt.onnx"
    no_vocab = onnx.load(str(good))
    no_vocab.graph.node[0].input[0] = "axis"  # the ids index nothing: the graph does not tell the vocabulary
    no_vocab.graph.node[0].op_type = "Identity"
    del no_vocab.graph.node[0].input[1:]
    (tmp_path / "v").mkdir()
    onnx.save(no_vocab, tmp_path / "v" / "no_vocab.onnx")
    paths["no_vocabulary"] = tmp_path / "v" / "no_vocab.onnx"
    np.savez(tmp_path / "eval.npz", x=np.zeros((4, 3), np.float32))
    name, extra = {"taken": "spam_fnn", "bad_name": "9lives"}.get(case, f"m_{case}"), []
    if case == "unknown_dim":
        extra = ["--dim", "height=3"]
    if case == "eval_mismatch":
        extra = ["--eval", str(tmp_path / "eval.npz")]
    if case == "no_head":  # an encoder's weights asked to classify: transformers would draw a random head
        paths[case], extra = write_hf_folder(tmp_path / "encoder"), ["--task", "text-classification"]
    if case == "hf_without_weights":
        (tmp_path / "empty").mkdir()
        (tmp_path / "empty" / "config.json").write_text('{"architectures": ["BertModel"]}')
        paths[case] = tmp_path / "empty"
    if case in ("code_without_shapes", "weights_do_not_fit", "not_a_factory"):
        code = write_tiny_model(tmp_path, "code")
        torch.save(torch.nn.Linear(3, 3).state_dict(), tmp_path / "other.pt")
        (code / "bad.py").write_text("def build():\n    return 3\n")
        paths[case] = f"{code}/{'bad' if case == 'not_a_factory' else 'net'}.py:build"
        extra = [] if case == "code_without_shapes" else ["--input", "x=12", "--weights", str(tmp_path / "other.pt")]
    if case == "scalar_input":  # a stateful audio model's sample rate
        paths[case] = odd_axes_file(tmp_path / "scalar", ["batch", 3], scalar=True)
    before = (project / "params.yaml").read_text()
    folders = sorted(p.name for p in (project / "models").iterdir())
    capsys.readouterr()  # what building the inputs printed
    with models_from(project):
        assert run_add(project, monkeypatch, name, str(paths.get(case, good)), *extra) == 2
    error = capsys.readouterr().err.strip()
    assert message in error and len(error.splitlines()) == 1, error
    assert (project / "params.yaml").read_text() == before
    assert sorted(p.name for p in (project / "models").iterdir()) == folders
    assert not list(project.glob(".params.yaml*"))


def test_add_a_hugging_face_encoder_folder(project, tmp_path, monkeypatch):
    folder = write_hf_folder(tmp_path / "encoder")
    assert run_add(project, monkeypatch, "hf_encoder", str(folder), "--dim", "seq=16") == 0
    entry = params_of(project)["catalog"]["hf_encoder"]
    assert entry["source"] == "torch" and entry["factory"] == "pipeline.prepare.hf_folder:build"
    assert entry["factory_args"] == {"folder": "models/hf_encoder/hf", "task": "feature-extraction"}
    assert list(entry["inputs"]) == ["input_ids", "attention_mask", "token_type_ids"]  # BERT has segments
    assert entry["inputs"]["input_ids"]["high"] == 16 and entry["dims"] == {"seq": 16}
    assert (project / "models/hf_encoder/hf/model.safetensors.dvc").is_file()
    assert (project / "models/hf_encoder/hf/tokenizer.json").is_file()  # small files stay for git


def test_add_a_classifier_folder_with_labelled_text(project, tmp_path, monkeypatch):
    import json

    folder = write_hf_folder(tmp_path / "clf", "BertForSequenceClassification")
    rows = [{"text": "the film was good", "label": "pos"}, {"text": "a bad film", "label": 0}] * 10
    (tmp_path / "reviews.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert run_add(project, monkeypatch, "hf_clf", str(folder), "--eval", str(tmp_path / "reviews.jsonl"),
                   "--dim", "seq=8") == 0  # fmt: skip
    entry = params_of(project)["catalog"]["hf_clf"]
    assert entry["task"] == "classification" and entry["metric"] == "accuracy" and entry["outputs"] == ["logits"]
    with np.load(project / "models/hf_clf/eval.npz") as data:
        assert data["input_ids"].shape == (20, 8) and list(data["labels"][:2]) == [1, 0]
        assert list(data["input_ids"][0, :6]) == [2, 5, 9, 10, 7, 3]  # [CLS] the film was good [SEP], its own ids
        assert data["attention_mask"][1].sum() == 5 and data["input_ids"][1, 5] == 0  # padded with its [PAD]


def test_add_a_vit_folder(project, tmp_path, monkeypatch):
    folder = write_hf_folder(tmp_path / "vit", "ViTForImageClassification")
    assert run_add(project, monkeypatch, "hf_vit", str(folder)) == 0
    entry = params_of(project)["catalog"]["hf_vit"]
    assert entry["inputs"] == {"pixel_values": {"shape": ["batch", 3, 16, 16], "dtype": "float32"}}
    assert entry["task"] == "classification" and "dims" not in entry


def test_add_a_keras_file(project, tmp_path, monkeypatch):
    import keras

    keras.utils.set_random_seed(0)
    inputs = keras.Input((None, 6), name="frames")  # an open time axis after the batch
    model = keras.Model(inputs, keras.layers.Dense(2)(keras.layers.GlobalAveragePooling1D()(inputs)))
    model.save(tmp_path / "seq.keras")
    assert run_add(project, monkeypatch, "tiny_seq", str(tmp_path / "seq.keras"), "--dim", "frames_1=10") == 0
    entry = params_of(project)["catalog"]["tiny_seq"]
    assert entry == {"source": "keras", "file": "seq.keras", "dims": {"frames_1": 10},
                     "inputs": {"frames": {"shape": ["batch", "frames_1", 6], "dtype": "float32"}}}  # fmt: skip
    assert (project / "models/tiny_seq/seq.keras.dvc").is_file()


def test_add_a_keras_2_h5_file(project, tmp_path, monkeypatch):
    """A whole-model HDF5 file as older Keras saved it (fer ships one): Keras 3 reads it through its legacy loader."""
    import keras

    keras.utils.set_random_seed(0)
    inputs = keras.Input((8, 8, 1), name="input_1")
    model = keras.Model(inputs, keras.layers.Dense(3, activation="softmax")(keras.layers.Flatten()(inputs)))
    model.save(tmp_path / "faces.hdf5")  # keras 3 writes .h5/.hdf5 in the legacy HDF5 format
    assert run_add(project, monkeypatch, "tiny_h5", str(tmp_path / "faces.hdf5")) == 0
    entry = params_of(project)["catalog"]["tiny_h5"]
    assert entry == {"source": "keras", "file": "faces.hdf5",
                     "inputs": {"input_1": {"shape": ["batch", 8, 8, 1], "dtype": "float32"}}}  # fmt: skip


def test_add_a_pytorch_factory_with_its_weights_and_a_sample(project, tmp_path, monkeypatch, capsys):
    """Code says nothing of its input shapes: --sample's arrays do (labels left out); the .py file is copied
    into models/NAME/ as a package, the weights are versioned by DVC, and the model is built and run once."""
    code = write_tiny_model(tmp_path, "mlp")
    with models_from(project):  # the factory is imported from the project's models/, not this repository's
        assert run_add(project, monkeypatch, "mlp_code", f"{code}/net.py:build", "--weights", str(code / "weights.pt"),
                       "--sample", str(code / "eval.npz"), "--eval", str(code / "eval.npz")) == 0  # fmt: skip
    entry = params_of(project)["catalog"]["mlp_code"]
    assert entry == {"source": "torch", "factory": "models.mlp_code.net:build", "file": "weights.pt",
                     "inputs": {"x": {"shape": ["batch", 12], "dtype": "float32"}}, "eval_data": "eval.npz",
                     "metric": "accuracy", "task": "classification"}  # fmt: skip
    folder = project / "models" / "mlp_code"
    assert all((folder / file).is_file() for file in ("__init__.py", "net.py", "weights.pt.dvc"))
    assert "inputs from --sample eval.npz: x" in capsys.readouterr().out


def test_add_a_jax_factory_from_input_flags(project, tmp_path, monkeypatch):
    (tmp_path / "linear.py").write_text(
        "import jax.numpy as jnp\nimport numpy as np\n\n\ndef build():\n"
        "    w = jnp.asarray(np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32))\n"
        "    return (lambda params, x: x @ params['w']), {'w': w}\n"
    )
    with models_from(project):
        assert run_add(project, monkeypatch, "jax_code", f"{tmp_path}/linear.py:build", "--input", "x=4") == 0
    entry = params_of(project)["catalog"]["jax_code"]
    assert entry["source"] == "jax" and entry["init_seed"] == 0 and "file" not in entry
    assert entry["inputs"] == {"x": {"shape": ["batch", 4], "dtype": "float32"}}


def test_add_a_savedmodel_folder(project, tmp_path, monkeypatch):
    import tensorflow as tf

    class Scale(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, None, 3], tf.float32, name="frames")])
        def serve(self, frames):
            return {"scaled": 2.0 * frames}

    module = Scale()
    tf.saved_model.save(module, str(tmp_path / "scale"), signatures={"serving_default": module.serve})
    assert run_add(project, monkeypatch, "saved", str(tmp_path / "scale"), "--dim", "frames_1=7") == 0
    entry = params_of(project)["catalog"]["saved"]
    assert entry == {"source": "savedmodel", "file": "scale", "dims": {"frames_1": 7},
                     "inputs": {"frames": {"shape": ["batch", "frames_1", 3], "dtype": "float32"}}}  # fmt: skip
    assert (project / "models" / "saved" / "scale.dvc").is_file()


def test_add_the_packaged_pretrained_minilm_folder(project, tmp_path, monkeypatch, capsys):
    """A real pretrained folder as it is shared (all-MiniLM-L6-v2, shipped inside a package), with text."""
    from models.minilm_l6_pretrained.net import files

    (tmp_path / "sentences.txt").write_text("A sentence encoder maps text to vectors.\nNearest neighbours stay.\n")
    assert run_add(project, monkeypatch, "minilm_folder", str(files()), "--eval", str(tmp_path / "sentences.txt"),
                   "--dim", "seq=32") == 0  # fmt: skip
    entry = params_of(project)["catalog"]["minilm_folder"]
    assert entry["factory_args"]["task"] == "feature-extraction" and entry["outputs"] == ["embedding"]
    assert entry["inputs"]["input_ids"]["high"] == 30522 and "token_type_ids" in entry["inputs"]
    assert "metric" not in entry and entry["eval_data"] == "eval.npz"  # no labels: fidelity only
    with np.load(project / "models/minilm_folder/eval.npz") as data:
        assert data["input_ids"].shape == (2, 32) and data["input_ids"][0, 0] == 101  # its [CLS]
    assert "task feature-extraction (config.json's architectures: BertModel)" in capsys.readouterr().out


def test_add_a_scikit_learn_file_with_its_zipmap(project, tmp_path, monkeypatch, capsys):
    """skl2onnx's defaults: ONNX-ML operators (onnx_ml: only ONNX Runtime variants get stages), a ZipMap of
    probabilities read as class scores, labelled rows for accuracy."""
    from tests.conftest import write_sklearn_onnx

    path, rows = write_sklearn_onnx(tmp_path / "forest")
    assert run_add(project, monkeypatch, "forest", str(path), "--eval", str(rows)) == 0
    entry = params_of(project)["catalog"]["forest"]
    assert entry["onnx_ml"] is True and entry["task"] == "classification" and entry["metric"] == "accuracy"
    assert entry["inputs"] == {"X": {"shape": ["batch", 4], "dtype": "float32"}}
    assert "output 'output_probability' is a ZipMap" in capsys.readouterr().out
    assert not missing_stages(load_params(project / "params.yaml"), project)


def test_a_softmax_output_is_read_as_class_scores(tmp_path):
    """A file ending in Softmax (a classifier exported with its probabilities, as ONNX zoo ResNets are)
    gets task: classification, so its output is judged by top-1 agreement, not as an embedding's neighbours;
    logits or an embedding (no Softmax) get no task."""

    def write(name: str, ops: list[str]) -> Path:
        weight = numpy_helper.from_array(np.ones((4, 3), np.float32), "w")
        nodes, last = [helper.make_node("MatMul", ["x", "w"], ["h0"])], "h0"
        for i, op in enumerate(ops, 1):
            nodes.append(helper.make_node(op, [last], [f"h{i}"], **({"axis": 1} if op == "Softmax" else {})))
            last = f"h{i}"
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
        y = helper.make_tensor_value_info(last, TensorProto.FLOAT, ["batch", 3])
        graph = helper.make_graph(nodes, name, [x], [y], [weight])
        path = tmp_path / f"{name}.onnx"
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
        return path

    probabilities = inspect_onnx("p", write("probabilities", ["Softmax", "Identity"]), Flags())
    assert probabilities.entry.task == "classification"
    assert any("comes from a softmax: class scores" in note for note in probabilities.notes)
    assert inspect_onnx("l", write("logits", ["Relu"]), Flags()).entry.task is None


def test_a_softmax_written_out_as_exp_reducesum_div_is_read_as_class_scores(tmp_path):
    """jax2tf writes a softmax as Exp(x - max) / ReduceSum(Exp(...)): the same class probabilities."""
    weight = numpy_helper.from_array(np.ones((4, 3), np.float32), "w")
    axes = numpy_helper.from_array(np.array([1], np.int64), "axes")
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["logits"]),
        *written_out_softmax("logits", "probabilities", "axes"),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
    y = helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["batch", 3])
    graph = helper.make_graph(nodes, "jax2tf_softmax", [x], [y], [weight, axes])
    path = tmp_path / "decomposed.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    assert inspect_onnx("d", path, Flags()).entry.task == "classification"


def sigmoid_tagger(folder: Path) -> Path:
    """A multi-label tagger from elsewhere: [batch, 4] -> Sigmoid -> [batch, 3] tag probabilities."""
    folder.mkdir(parents=True, exist_ok=True)
    weight = numpy_helper.from_array(np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["logits"]), helper.make_node("Sigmoid", ["logits"], ["tags"])]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
    y = helper.make_tensor_value_info("tags", TensorProto.FLOAT, ["batch", 3])
    path = folder / "tagger.onnx"
    graph = helper.make_graph(nodes, "tagger", [x], [y], [weight])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return path


def test_add_takes_the_users_metric_file_and_the_outputs_threshold(project, tmp_path, monkeypatch, capsys):
    """--metric FILE.py:FUNCTION is copied beside the model and named in the entry as a factory is; the labels
    are any eval array that is not an input; --threshold is where the tag decisions are read; the sigmoid
    output is said to be judged by its decisions."""
    path = sigmoid_tagger(tmp_path / "elsewhere")
    rng = np.random.default_rng(1)
    np.savez(tmp_path / "eval.npz", x=rng.normal(size=(12, 4)).astype(np.float32), tags_true=rng.random((12, 3)) > 0.5)
    (tmp_path / "tag_metric.py").write_text(
        "import numpy as np\n\n\ndef missed(outputs, labels):\n"
        "    return float(np.mean((outputs['tags'] >= 0.3) != labels['tags_true']))\n\n\n"
        "missed.higher_is_better = False\n"
    )
    args = [
        "tagger",
        str(path),
        "--eval",
        str(tmp_path / "eval.npz"),
        "--metric",
        f"{tmp_path / 'tag_metric.py'}:missed",
    ]
    assert run_add(project, monkeypatch, *args, "--threshold", "tags=0.3") == 0
    entry = params_of(project)["catalog"]["tagger"]
    assert entry["metric"] == "models.tagger.tag_metric:missed" and entry["decision_threshold"] == {"tags": 0.3}
    assert "task" not in entry  # a user's metric makes no classifier
    assert (project / "models" / "tagger" / "tag_metric.py").is_file()
    printed = capsys.readouterr().out
    assert "output 'tags' comes from a sigmoid: probabilities" in printed
    assert (
        "output 'tags' read as probabilities: every value in [0, 1], rows not summing to 1 (the graph's Sigmoid) "
        "(on 12 eval rows); decisions at 0.3 (--threshold tags=V to read them elsewhere)" in printed
    )
    assert "metric: missed from tag_metric.py (copied beside the model; lower is better)" in printed
    assert "labelled rows (tags_true [12, 3])" in printed


def face_model(folder: Path) -> Path:
    """A face model from elsewhere, its outputs named as exporters keep them: raw per-anchor scores
    ('classificators', no sigmoid), 'landmarks' in pixels, and an 'Identity' nothing tells."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    weights = {"w1": rng.normal(0, 3, (4, 1)), "w2": rng.normal(0, 5, (4, 6)), "w3": rng.normal(0, 1, (4, 4))}
    initializers = [numpy_helper.from_array(v.astype(np.float32), k) for k, v in weights.items()]
    initializers.append(numpy_helper.from_array(np.full(6, 96.0, np.float32), "centre"))
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["classificators"]),
             helper.make_node("MatMul", ["x", "w2"], ["offsets"]), helper.make_node("Add", ["offsets", "centre"],
                                                                                   ["landmarks"]),
             helper.make_node("MatMul", ["x", "w3"], ["Identity"])]  # fmt: skip
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
    outputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, ["batch", n])
               for name, n in (("classificators", 1), ("landmarks", 6), ("Identity", 4))]  # fmt: skip
    path = folder / "face.onnx"
    graph = helper.make_graph(nodes, "face", [x], outputs, initializers)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return path


def test_add_says_each_outputs_reading_and_never_decisions_for_values(project, tmp_path, monkeypatch, capsys):
    path = face_model(tmp_path / "elsewhere")
    np.savez(tmp_path / "faces.npz", x=np.random.default_rng(1).normal(size=(20, 4)).astype(np.float32))
    assert run_add(project, monkeypatch, "face", str(path), "--eval", str(tmp_path / "faces.npz"),
                   "--tolerance", "landmarks=2") == 0  # fmt: skip
    printed = capsys.readouterr().out
    assert "eval data: 20 rows, no labels: each output judged by its reading (below)" in printed
    assert (
        "output 'classificators' read as logits: its name 'classificators', one unbounded score per position "
        "(logits read through a sigmoid) (on 20 eval rows); decisions at 0.5 (--threshold classificators=V" in printed
    )
    assert "output 'landmarks' read as points: its name 'landmarks'" in printed
    assert "output 'landmarks': a point may move 2 (--tolerance)" in printed
    (values,) = [line for line in printed.splitlines() if "output 'Identity'" in line]
    assert "none of the above: no decision found, judged by cosine and its largest error" in values
    assert "decisions at" not in values and "--judged-as Identity=KIND if users read decisions from it" in values
    assert params_of(project)["catalog"]["face"]["point_tolerance"] == {"landmarks": 2.0}


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--metric", "nowhere.py:f"], "nowhere.py: file not found"),
        (["--metric", "{tmp}/m.py:absent"], "defines no function 'absent'"),
        (["--threshold", "tags=1.5"], "--threshold tags=1.5: a threshold lies between 0 and 1"),
        (["--judged-as", "tags=scores"], "--judged-as tags=scores: the kind is one of"),
        (["--threshold", "other=0.2"], "--judged-as/--threshold/--tolerance other: no such output (outputs: tags)"),
        (["--tolerance", "tags=0"], "--tolerance tags=0: a tolerance is a distance above 0"),
    ],
)
def test_bad_judging_flags_are_one_line_and_leave_nothing(project, tmp_path, monkeypatch, capsys, flags, message):
    path = sigmoid_tagger(tmp_path / "elsewhere")
    np.savez(tmp_path / "eval.npz", x=np.zeros((4, 4), np.float32), labels=np.zeros((4, 3)))
    (tmp_path / "m.py").write_text("def present(outputs, labels):\n    return 1.0\n")
    before = (project / "params.yaml").read_text()
    flags = [flag.replace("{tmp}", str(tmp_path)) for flag in flags]
    assert run_add(project, monkeypatch, "bad_tagger", str(path), "--eval", str(tmp_path / "eval.npz"), *flags) == 2
    assert message in capsys.readouterr().err
    assert (project / "params.yaml").read_text() == before and not (project / "models" / "bad_tagger").exists()


def test_labels_no_built_in_metric_reads_are_kept_and_said(project, tmp_path, monkeypatch, capsys):
    """An eval array that is no input and not `labels` (a text mask) without --metric: kept in the eval data for a
    metric to come, the model judged by its outputs' decisions meanwhile, and `add` says so."""
    path = sigmoid_tagger(tmp_path / "elsewhere")
    np.savez(tmp_path / "eval.npz", x=np.zeros((4, 4), np.float32), tags_true=np.zeros((4, 3), bool))
    assert run_add(project, monkeypatch, "mask_tagger", str(path), "--eval", str(tmp_path / "eval.npz")) == 0
    entry = params_of(project)["catalog"]["mask_tagger"]
    assert "metric" not in entry and "task" not in entry and entry["eval_data"] == "eval.npz"
    assert "labels (tags_true [4, 3]) no built-in metric reads" in capsys.readouterr().out
