"""Source loading and ONNX export, with the errors a user sees for bad input."""

from __future__ import annotations

import shutil

import numpy as np
import onnx
import pytest
import torch

from pipeline.core.config import ExportConfig
from pipeline.core.data import DataSet, generate_inputs
from pipeline.core.errors import ConfigError, ModelFileError
from pipeline.prepare.export import check_onnx
from pipeline.prepare.sources import load_source
from tests.conftest import tiny_config


def test_torch_export_has_dynamic_batch_and_parity(tiny_project):
    source = load_source("tiny", tiny_config(), tiny_project)
    assert source.output_names == ["output"]
    path = tiny_project / "tiny.onnx"
    info = source.export_onnx(path, ExportConfig())
    assert info["exporter"] == "torch.onnx (dynamo)"
    model = onnx.load(str(path))
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param  # symbolic batch
    inputs = generate_inputs(tiny_config().inputs, 5, seed=3)
    report = check_onnx(path, DataSet(inputs, source.predict(inputs)), atol=1e-5, rtol=1e-4)
    assert report["parity"] == "ok" and report["checker"] == "ok" and report["parity_max_abs_diff"] < 1e-5


RECURRENT_NET = """
import torch


class Recurrent(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.forward_lstm = torch.nn.LSTM(8, 8, num_layers=2, batch_first=True)
        self.backward_gru = torch.nn.GRU(8, 8, batch_first=True)

    def forward(self, x):
        ahead, _ = self.forward_lstm(x)
        behind, _ = self.backward_gru(torch.flip(x, [1]))
        return ahead + torch.flip(behind, [1]).expand_as(ahead)


def build():
    torch.manual_seed(0)
    return Recurrent()
"""


def test_recurrent_layers_export_as_lstm_and_gru_nodes_for_any_length(tiny_project):
    """The dynamo export runs under torch.export's while_loop decompositions of LSTM and GRU (their meta by one
    looped cell, not one per time step): the file must still hold an LSTM or GRU node per layer and answer
    like the module at a batch and a length it was not exported at."""
    (tiny_project / "models/tiny/recurrent.py").write_text(RECURRENT_NET)
    shape = {"x": {"shape": ["batch", "time", 8]}}
    config = tiny_config(factory="models.tiny.recurrent:build", file=None, inputs=shape)
    source = load_source("tiny", config, tiny_project, dims={"time": 6})
    path = tiny_project / "recurrent.onnx"
    source.export_onnx(path, ExportConfig())
    ops = [node.op_type for node in onnx.load(str(path)).graph.node]
    assert ops.count("LSTM") == 2 and ops.count("GRU") == 1 and "Loop" not in ops  # a node per layer
    inputs = {"x": np.random.default_rng(0).standard_normal((3, 11, 8)).astype(np.float32)}
    report = check_onnx(path, DataSet(inputs, source.predict(inputs)), atol=1e-5, rtol=1e-4)
    assert report["parity"] == "ok", report


def test_torchscript_exporter_also_works(tiny_project):
    source = load_source("tiny", tiny_config(outputs=["logits"]), tiny_project)
    path = tiny_project / "legacy.onnx"
    source.export_onnx(path, ExportConfig(torch_exporter="torchscript", opset=17))
    assert [o.name for o in onnx.load(str(path)).graph.output] == ["logits"]


def test_parity_failure_is_detected(tiny_project):
    source = load_source("tiny", tiny_config(), tiny_project)
    path = tiny_project / "tiny.onnx"
    source.export_onnx(path, ExportConfig())
    inputs = generate_inputs(tiny_config().inputs, 4, seed=0)
    wrong = {k: v + 0.5 for k, v in source.predict(inputs).items()}
    assert check_onnx(path, DataSet(inputs, wrong), atol=1e-4, rtol=0)["parity"] == "failed"


def test_text_parity_is_equality_row_by_row_and_the_reason_counts_the_rows(tmp_path):
    """A text output has no tolerance: one row's string differs and the export fails, naming the output and rows."""
    from onnx import TensorProto, helper

    from pipeline.prepare.export import parity_failure

    io = [helper.make_tensor_value_info(n, TensorProto.STRING, ["batch"]) for n in ("text", "same")]
    graph = helper.make_graph([helper.make_node("Identity", ["text"], ["same"])], "g", io[:1], io[1:])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)
    onnx.save(model, tmp_path / "echo.onnx")
    rows = np.array(["a", "b", "c"])
    assert check_onnx(tmp_path / "echo.onnx", DataSet({"text": rows}, {"same": rows}), 1e-4, 0)["parity"] == "ok"
    report = check_onnx(tmp_path / "echo.onnx", DataSet({"text": rows}, {"same": np.array(["a", "x", "c"])}), 1e-4, 0)
    assert report["parity"] == "failed" and report["parity_text_rows_differ"] == {"same": 1}
    assert "same on 1 of 3 rows" in parity_failure(report, 3)


def test_wrong_input_spec_names_the_field(tiny_project):
    with pytest.raises(ConfigError, match=r"params.yaml: catalog.tiny.inputs: the model rejects inputs x\(2, 7\)"):
        load_source("tiny", tiny_config(inputs={"x": {"shape": ["batch", 7]}}), tiny_project)


def test_missing_and_corrupt_weights_name_the_file(tiny_project):
    with pytest.raises(ModelFileError, match=r"models/tiny/nope.pt: not found \(params.yaml: catalog.tiny.file\)"):
        load_source("tiny", tiny_config(file="nope.pt"), tiny_project)
    (tiny_project / "models/tiny/bad.pt").write_bytes(b"garbage")
    with pytest.raises(ModelFileError, match=r"bad.pt: not a readable PyTorch state_dict"):
        load_source("tiny", tiny_config(file="bad.pt"), tiny_project)
    torch.save({"0.weight": torch.zeros(2, 2)}, tiny_project / "models/tiny/other.pt")
    with pytest.raises(ModelFileError, match=r"other.pt: does not fit models.tiny.net:build"):
        load_source("tiny", tiny_config(file="other.pt"), tiny_project)


def test_unimportable_factory(tiny_project):
    with pytest.raises(ConfigError, match=r"catalog.tiny.factory: cannot import 'models.nothing'"):
        load_source("tiny", tiny_config(factory="models.nothing:build"), tiny_project)
    with pytest.raises(ConfigError, match=r"catalog.tiny.factory: 'models.tiny.net' has no attribute 'make'"):
        load_source("tiny", tiny_config(factory="models.tiny.net:make"), tiny_project)


def onnx_config(**overrides):
    base = {"source": "onnx", "file": "model.onnx", "inputs": {"x": {"shape": ["batch", 12]}}, "factory": None}
    return tiny_config(**(base | overrides))


def test_onnx_source_checks_spec_against_graph(tiny_project, tiny_onnx):
    shutil.copy(tiny_onnx, tiny_project / "models/tiny/model.onnx")
    source = load_source("tiny", onnx_config(eval_data=None), tiny_project)
    out = source.predict({"x": np.zeros((3, 12), np.float32)})
    assert out["output"].shape == (3, 3)
    with pytest.raises(ConfigError, match=r"catalog.tiny.inputs: names \['image'\] do not match the inputs of"):
        load_source("tiny", onnx_config(inputs={"image": {"shape": ["batch", 12]}}), tiny_project)
    with pytest.raises(ConfigError, match=r"catalog.tiny.inputs.x.shape: .* fixes dimension 1 to 12; declare it as 12"):
        load_source("tiny", onnx_config(inputs={"x": {"shape": ["batch", 10]}}), tiny_project)
    with pytest.raises(ConfigError, match=r"catalog.tiny.inputs.x.dtype: int64 declared"):
        load_source("tiny", onnx_config(inputs={"x": {"shape": ["batch", 12], "dtype": "int64"}}), tiny_project)


def test_corrupt_onnx_names_the_file(tiny_project):
    (tiny_project / "models/tiny/model.onnx").write_bytes(b"\x08\x01garbage")
    with pytest.raises(
        ModelFileError, match=r"models/tiny/model.onnx: not a valid ONNX model \(params.yaml: catalog.tiny.file\)"
    ):
        load_source("tiny", onnx_config(), tiny_project)
