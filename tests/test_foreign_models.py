"""Models written elsewhere: colliding output names, nested outputs, token inputs with a dynamic
sequence axis, ONNX files with a fixed batch, baked-in shapes and external weights."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from pipeline.core import onnx_files
from pipeline.core.config import ExportConfig, ModelConfig
from pipeline.core.errors import ConfigError, ModelFileError
from pipeline.prepare.sources import load_source
from tests.conftest import models_from, write_fixed_batch_onnx

NETS = textwrap.dedent(
    """
    import torch
    from torch import nn


    class Tagger(nn.Module):
        '''Token ids -> an embedding and nested per-token scores; owns a module named `embedding`.'''

        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(50, 8)
            self.score = nn.Linear(8, 3)

        def forward(self, ids, mask):
            hidden = self.embedding(ids) * mask.unsqueeze(-1)
            return hidden.mean(1), (self.score(hidden), {"norm": hidden.norm(dim=-1)})


    def tagger():
        return Tagger()


    def bert():
        from models.minilm_l6.net import build

        return build(vocab_size=100, hidden=32, layers=1, heads=2, intermediate=64)
    """
)
TOKENS = {
    "ids": {"shape": ["batch", "seq"], "dtype": "int64", "kind": "token_ids", "high": 50},
    "mask": {"shape": ["batch", "seq"], "dtype": "int64", "kind": "attention_mask"},
}


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "models" / "nets").mkdir(parents=True)
    (tmp_path / "models" / "__init__.py").touch()
    (tmp_path / "models" / "nets" / "__init__.py").write_text(NETS)
    shutil.copytree(Path(__file__).parents[1] / "models" / "minilm_l6", tmp_path / "models" / "minilm_l6")
    monkeypatch.chdir(tmp_path)
    with models_from(tmp_path):
        yield tmp_path


def export(project: Path, name: str, config: ModelConfig) -> tuple[object, ort.InferenceSession]:
    source = load_source(name, config, project)
    path = project / f"{name}.onnx"
    source.export_onnx(path, ExportConfig())
    return source, ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def test_output_names_never_collide_and_nested_outputs_are_flattened(project):
    config = ModelConfig(source="torch", factory="models.nets:tagger", inputs=TOKENS, dims={"seq": 6})
    source, session = export(project, "tagger", config)
    assert source.output_names == ["output0", "output1_0", "output1_1_norm"]  # stable names from the nesting
    named = ModelConfig(**config.model_dump() | {"outputs": ["embedding", "scores", "norms"]})
    source, session = export(project, "tagger", named)  # 'embedding' is also the name of an internal tensor
    assert [o.name for o in session.get_outputs()] == ["embedding", "scores", "norms"]
    x = {"ids": np.array([[3, 4, 0]], np.int64), "mask": np.array([[1, 1, 0]], np.int64)}
    for got, (name, want) in zip(session.run(None, x), source.predict(x).items(), strict=True):
        np.testing.assert_allclose(got, want, atol=1e-5, err_msg=name)


def test_transformer_keeps_its_sequence_axis_dynamic(project):
    config = ModelConfig(
        source="torch",
        factory="models.nets:bert",
        inputs={"input_ids": TOKENS["ids"] | {"high": None}, "attention_mask": TOKENS["mask"]},
        outputs=["embedding"],
        dims={"seq": 12},
    )
    source, session = export(project, "bert", config)
    assert source.vocab_size == 100  # read from the model's config
    assert [d.dim_param for d in onnx.load(str(project / "bert.onnx")).graph.input[0].type.tensor_type.shape.dim] == [
        "batch",
        "seq",
    ]
    from pipeline.core.data import generate_inputs

    for seq in (5, 37):
        x = generate_inputs(config.inputs, 3, 1, {"seq": seq}, source.vocab_size)
        np.testing.assert_allclose(session.run(None, x)[0], source.predict(x)["embedding"], atol=1e-5)


def fixed_config(**extra) -> ModelConfig:
    return ModelConfig(source="onnx", file="model.onnx", inputs={"image": {"shape": [1, 3, 16, 16]}}, **extra)


def test_fixed_batch_onnx_with_external_weights_is_taken_as_it_is(project):
    write_fixed_batch_onnx(project / "models" / "fixed")
    with pytest.raises(ConfigError, match=r"inputs.image.shape: .* fixes the batch axis to 1; declare it as 1"):
        load_source("fixed", fixed_config().model_copy(update={"inputs": ModelConfig(
            source="onnx", file="m", inputs={"image": {"shape": ["batch", 3, 16, 16]}}).inputs}), project)  # fmt: skip
    source = load_source("fixed", fixed_config(), project)
    out = project / "copy" / "model.onnx"
    out.parent.mkdir()
    report = source.export_onnx(out, ExportConfig())
    assert "make_batch_dynamic" not in report and (out.parent / "model.onnx.data").is_file()
    assert onnx_files.external_files(out) == [out.parent / "model.onnx.data"]
    onnx.checker.check_model(str(out), full_check=True)


def test_make_batch_dynamic_keeps_the_fixed_model_when_a_reshape_bakes_the_batch(project):
    write_fixed_batch_onnx(project / "models" / "fixed")
    source = load_source("fixed", fixed_config(make_batch_dynamic=True), project)
    report = source.export_onnx(project / "out.onnx", ExportConfig())
    assert report["make_batch_dynamic"].startswith("kept fixed") and "fixed_batch" not in report
    dims = onnx.load(str(project / "out.onnx"), load_external_data=False).graph.input[0].type.tensor_type.shape.dim
    assert dims[0].dim_value == 1


def test_make_batch_dynamic_relaxes_a_model_that_proves_it(project):
    folder = project / "models" / "flat"
    folder.mkdir(parents=True)
    x = onnx.helper.make_tensor_value_info("image", onnx.TensorProto.FLOAT, [1, 3, 16, 16])
    y = onnx.helper.make_tensor_value_info("scores", onnx.TensorProto.FLOAT, [1, 3])
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("ReduceMean", ["image", "axes"], ["scores"], keepdims=0)],
        "flat",
        [x],
        [y],
        [onnx.numpy_helper.from_array(np.array([2, 3], np.int64), "axes")],
    )
    onnx.save(
        onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 18)], ir_version=9),
        folder / "model.onnx",
    )
    source = load_source("flat", fixed_config(make_batch_dynamic=True), project)
    report = source.export_onnx(project / "out.onnx", ExportConfig())
    assert report["fixed_batch"] is None and report["make_batch_dynamic"].startswith("relaxed")
    session = ort.InferenceSession(str(project / "out.onnx"), providers=["CPUExecutionProvider"])
    assert session.run(None, {"image": np.ones((5, 3, 16, 16), np.float32)})[0].shape == (5, 3)


def test_truncated_onnx_file_names_the_file_and_field(project):
    write_fixed_batch_onnx(project / "models" / "fixed")
    path = project / "models" / "fixed" / "model.onnx"
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(ModelFileError, match=r"model.onnx: not a valid ONNX model \(params.yaml: catalog.fixed.file\)"):
        load_source("fixed", fixed_config(), project)


def test_resave_and_remove_unreferenced_leave_a_model_and_its_own_side_files(tmp_path):
    """torch's TorchScript exporter writes one side file per tensor: a re-saved export keeps none of them."""
    from onnx import TensorProto, helper, numpy_helper

    weights = [numpy_helper.from_array(np.full((4, 4), i, np.float32), f"w{i}") for i in range(2)]
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w0"], ["h"]), helper.make_node("MatMul", ["h", "w1"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        weights,
    )
    path = tmp_path / "model.onnx"
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=False, size_threshold=0)
    assert len(onnx_files.external_files(path)) == 2
    (tmp_path / "stray-copy-of-w0").write_bytes(b"0" * 64)  # what ORT's static quantizer leaves beside its output
    onnx_files.remove_unreferenced(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx", "w0", "w1"]  # its own side files stay
    onnx_files.resave(onnx.load(str(path)), path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx"]  # small: weights inside, side files gone
    y = ort.InferenceSession(str(path)).run(None, {"x": np.ones((1, 4), np.float32)})[0]
    assert np.allclose(y, 0.0)  # w0 is zeros: the weights survived the rewrite


def test_a_fallback_predicts_validation_outputs_on_a_fixed_batch_file_one_batch_at_a_time(project):
    """The validation rows' source outputs are predicted where a fallback asks (export.source_outputs):
    on a file whose batch is fixed to 1, row by row, as the export predicts the scoring rows."""
    from pipeline.core.records.source import SourceRecord
    from pipeline.prepare.export import source_outputs

    write_fixed_batch_onnx(project / "models" / "fixed")
    rows = {"image": np.random.default_rng(0).standard_normal((5, 3, 16, 16)).astype(np.float32)}
    info = SourceRecord(model="fixed", status="ok", export={"status": "ok"}, batching={"max_batch": 1})
    outputs = source_outputs("fixed", fixed_config(), project, info, rows)
    source = load_source("fixed", fixed_config(), project)
    for name, values in outputs.items():
        assert values.shape[0] == 5
        assert np.allclose(values[3:4], source.predict({"image": rows["image"][3:4]})[name], atol=1e-6)


def test_weights_held_in_constant_nodes_become_initializers_the_quantizers_see(tmp_path):
    """paddle2onnx keeps weights in Constant nodes, where ORT's quantizers do not look: its dynamic INT8
    came out as the float model under an INT8 name. The export moves them (the same values, names)."""
    from onnx import TensorProto, helper, numpy_helper

    from pipeline.prepare.sources.onnxfile import constants_as_initializers

    weight = np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32)
    nodes = [
        helper.make_node("Constant", [], ["w"], value=numpy_helper.from_array(weight, "w")),
        helper.make_node("Constant", [], ["one"], value=numpy_helper.from_array(np.array(1.0, np.float32), "one")),
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("Add", ["h", "one"], ["y"]),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8])
    model = helper.make_model(helper.make_graph(nodes, "p2o", [x], [y]), opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # what exporters write; onnx 1.23 defaults to an IR newer than ORT reads
    before = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    assert constants_as_initializers(model) == 1  # the weight; a scalar stays a Constant
    assert [i.name for i in model.graph.initializer] == ["w"] and model.graph.node[0].op_type == "Constant"
    onnx.checker.check_model(model)
    after = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    rows = {"x": np.ones((2, 16), np.float32)}
    np.testing.assert_array_equal(before.run(None, rows)[0], after.run(None, rows)[0])
