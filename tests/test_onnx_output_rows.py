"""An ONNX output whose rows (the batch) are not on axis 0, found for fixed batches too: by shape
inference, the declared shape, a run, or the user's `output_rows` (`add --output-rows`); a wrongly
declared output taken as it returns, noted, and declared so in the exported copy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
import yaml
from onnx import TensorProto, helper, numpy_helper

from pipeline.core.config import ExportConfig, ModelConfig
from pipeline.core.data import run_batched
from pipeline.core.errors import ConfigError
from pipeline.core.validation import validate
from pipeline.prepare.sources import load_source
from pipeline.prepare.sources.onnxfile import OnnxSource, declared_shape
from tests.foreign_graphs import stateful
from tests.test_add import params_of, project, run_add  # noqa: F401 - `project` is a fixture

RNG = np.random.default_rng(0)


def write(root: Path, name: str, nodes: list, x: list, y: list | None, constants: list | None = None) -> Path:
    """models/NAME/model.onnx: input x of shape `x`, output y declared `y` (None: no shape declared)."""
    output = helper.make_tensor_value_info("y", TensorProto.FLOAT, y)
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x)], [output],
                              constants or [])  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = root / "models" / name / "model.onnx"
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, path)
    return path


def baked(shape: list[int]) -> tuple[list, list]:
    """A Reshape to a constant shape, as exporters bake a fixed batch in: shape inference loses the batch."""
    constant = numpy_helper.from_array(np.array(shape, np.int64), "baked")
    return [helper.make_node("Reshape", ["x", "baked"], ["xr"])], [constant]


def recogniser(root: Path, bake: bool = False) -> Path:
    """A CTC recogniser as torch 1.9 exports one: x [1, 3, 8] -> logits [8 positions, 1, 5 classes],
    declared [1, 'seqlen']."""
    nodes, constants = baked([1, 3, 8]) if bake else ([], [])
    nodes += [helper.make_node("Transpose", ["xr" if bake else "x"], ["t"], perm=[2, 0, 1]),
              helper.make_node("MatMul", ["t", "w"], ["y"])]  # fmt: skip
    constants.append(numpy_helper.from_array(RNG.standard_normal((3, 5)).astype(np.float32), "w"))
    return write(root, "ctc", nodes, [1, 3, 8], [1, "seqlen"], constants)


def onnx_config(shape: list, **extra) -> ModelConfig:
    return ModelConfig(source="onnx", file="model.onnx", inputs={"x": {"shape": shape}}, **extra)


@pytest.mark.parametrize(("bake", "how"), [(False, "graph"), (True, "run")])
def test_a_fixed_batch_recogniser_returns_its_rows_first_and_notes_its_wrong_declaration(tmp_path, bake, how):
    recogniser(tmp_path, bake)
    source = load_source("ctc", onnx_config([1, 3, 8]), tmp_path)
    assert source.output_batch_axes == {"y": 1} and source.rows["y"].how.startswith(how)
    assert source.declared_shape_notes == {
        "y": "output 'y' declared [1, 'seqlen'], returns [8, 1, 5] at batch 1: taken as returned, rows on axis 1"
    }
    x = RNG.standard_normal((3, 3, 8)).astype(np.float32)  # three rows, run one at a time (the fixed batch)
    assert source.predict({"x": x[:1]})["y"].shape == (1, 8, 5)
    outputs = run_batched(source.predict, {"x": x}, 1, fixed=True)["y"]
    assert outputs.shape == (3, 8, 5) and np.allclose(outputs[2], source.predict({"x": x[2:]})["y"][0])
    report = source.export_onnx(tmp_path / "exported.onnx", ExportConfig())
    assert report["declared_shape_notes"] == source.declared_shape_notes
    exported = onnx.load(str(tmp_path / "exported.onnx")).graph.output[0]
    assert declared_shape(exported) == ["?", 1, "?"]  # as it returns: an optimizer trusting it keeps the rows


@pytest.mark.parametrize(("bake", "how"), [(False, "graph"), (True, "run")])
def test_a_fixed_batch_of_two_on_the_second_axis_is_found(tmp_path, bake, how):
    """x [2, 2, 4] -> y [2 positions, 2 rows, 4]: two axes of size 2; the rows are the one that reverses
    with them (or the one shape inference carries the batch to)."""
    nodes, constants = baked([2, 2, 4]) if bake else ([], [])
    nodes.append(helper.make_node("Transpose", ["xr" if bake else "x"], ["y"], perm=[1, 0, 2]))
    write(tmp_path, "pairs", nodes, [2, 2, 4], [2, 2, 4], constants)
    source = load_source("pairs", onnx_config([2, 2, 4]), tmp_path)
    assert source.output_batch_axes == {"y": 1} and source.rows["y"].how.startswith(how)
    assert source.declared_shape_notes == {}
    x = RNG.standard_normal((2, 2, 4)).astype(np.float32)
    assert np.array_equal(source.predict({"x": x})["y"], x)  # rows first: the input itself


def ambiguous(root: Path, name: str = "ambiguous", returned: tuple[int, ...] = (1, 1, 4)) -> Path:
    """x [1, 4] -> y `returned` through a baked Reshape: no graph evidence, only the sizes a run returns."""
    nodes, constants = baked(list(returned))
    nodes.append(helper.make_node("Identity", ["xr"], ["y"]))
    return write(root, name, nodes, [1, 4], list(returned), constants)


def test_a_batch_1_output_with_several_size_1_axes_takes_the_inputs_batch_axis_until_told(tmp_path):
    """At the fixed batch 1, y [1, 1, 4] has two axes that follow the rows: the inputs' batch axis (0) is taken
    and said; `output_rows` moves it; y [4, 1, 1], whose size-1 axes leave out the inputs' batch axis, is refused."""
    ambiguous(tmp_path)
    source = load_source("ambiguous", onnx_config([1, 4]), tmp_path)
    assert source.output_batch_axes == {} and source.rows["y"].how.startswith("assumed")
    assert source.notes == ["output 'y': rows on axis 0 (assumed: at the fixed batch 1 axes [0, 1] have size 1; the "
                            "inputs' batch is axis 0 (--output-rows y=AXIS to change))"]  # fmt: skip
    source = load_source("ambiguous", onnx_config([1, 4], output_rows={"y": 1}), tmp_path)
    assert source.output_batch_axes == {"y": 1} and source.rows["y"].how.startswith("given")
    assert source.predict({"x": np.ones((1, 4), np.float32)})["y"].shape == (1, 1, 4)
    with pytest.raises(ConfigError, match=r"output_rows\.y: axis 3, but the output returns \[1, 1, 4\]"):
        load_source("ambiguous", onnx_config([1, 4], output_rows={"y": 3}), tmp_path)
    ambiguous(tmp_path, "contradicted", (4, 1, 1))
    with pytest.raises(ConfigError, match=r"catalog\.contradicted\.output_rows: output 'y'.*--output-rows y=AXIS"):
        load_source("contradicted", onnx_config([1, 4]), tmp_path)


@pytest.mark.parametrize(
    ("entry", "message"),
    [({"source": "keras", "file": "m.keras"}, r"catalog\.m\.output_rows: applies to ONNX files"),
     ({"source": "onnx", "file": "m.onnx", "outputs": ["y"]}, r"catalog\.m\.output_rows\.z: not an output")],
)  # fmt: skip
def test_output_rows_is_checked_with_the_entry(entry, message):
    with pytest.raises(ConfigError, match=message):
        validate(ModelConfig, entry | {"inputs": {"x": {"shape": ["batch", 4]}}, "output_rows": {"z": 1}},
                 "params.yaml", "catalog.m")  # fmt: skip


def test_an_open_batch_model_is_not_run_when_its_graph_says_rows_first(tmp_path, monkeypatch):
    write(tmp_path, "plain", [helper.make_node("Relu", ["x"], ["y"])], ["N", 4], ["N", 4])
    monkeypatch.setattr(OnnxSource, "probe", lambda *_: pytest.fail("a rows-first graph was run"))
    assert load_source("plain", onnx_config(["batch", 4]), tmp_path).output_batch_axes == {}


def test_an_open_batch_model_with_rows_second_is_found(tmp_path):
    """A rows-first input and an output [positions, batch, features]: once taken as rows first."""
    write(tmp_path, "seq", [helper.make_node("Transpose", ["x"], ["y"], perm=[1, 0, 2])], ["N", 6, 4], [6, "N", 4])
    source = load_source("seq", onnx_config(["batch", 6, 4]), tmp_path)
    assert source.output_batch_axes == {"y": 1} and source.rows["y"].how.startswith("graph")
    x = RNG.standard_normal((3, 6, 4)).astype(np.float32)
    assert np.array_equal(source.predict({"x": x})["y"], x)


def test_a_state_with_its_batch_axis_second_is_found(tmp_path):
    """silero-vad's form (tests/foreign_graphs.py, through dvc repro in tests/test_e2e_add.py): a state
    [2, batch, 4] in and out."""
    stateful(tmp_path / "models" / "stateful")
    inputs = {"x": {"shape": ["batch", 8]}, "state": {"shape": [2, "batch", 4], "batch_axis": 1},
              "sr": {"shape": [], "dtype": "int64", "value": 16000}}  # fmt: skip
    config = ModelConfig(source="onnx", file="stateful.onnx", inputs=inputs)
    assert load_source("stateful", config, tmp_path).output_batch_axes == {"stateN": 1}


def test_add_writes_output_rows_and_says_how_each_axis_was_found(project, tmp_path, monkeypatch, capsys):  # noqa: F811
    path = str(ambiguous(tmp_path, "contradicted", (4, 1, 1)))
    assert run_add(project, monkeypatch, "contradicted", path) == 2
    assert "catalog.contradicted.output_rows: output 'y'" in capsys.readouterr().err
    assert "contradicted" not in params_of(project)["catalog"] and not (project / "models" / "contradicted").exists()
    assert run_add(project, monkeypatch, "contradicted", path, "--output-rows", "z=1") == 2
    assert "--output-rows z: no such output (outputs: ['y'])" in capsys.readouterr().err
    assert run_add(project, monkeypatch, "contradicted", path, "--output-rows", "y=1") == 0
    assert params_of(project)["catalog"]["contradicted"]["output_rows"] == {"y": 1}
    assert "output 'y': rows on axis 1 (given: output_rows)" in capsys.readouterr().out
    assert run_add(project, monkeypatch, "ambiguous", str(ambiguous(tmp_path))) == 0  # one `add`, the axis said
    assert "output 'y': rows on axis 0 (assumed: at the fixed batch 1" in capsys.readouterr().out
    assert "output_rows" not in params_of(project)["catalog"]["ambiguous"]
    recogniser(tmp_path)
    assert run_add(project, monkeypatch, "ctc", str(tmp_path / "models" / "ctc" / "model.onnx")) == 0
    printed = capsys.readouterr().out
    assert "output 'y': rows on axis 1 (graph: shape inference carries the batch there)" in printed
    assert "output 'y' declared [1, 'seqlen'], returns [8, 1, 5]" in printed
    assert "output_rows" not in params_of(project)["catalog"]["ctc"]
    assert yaml.safe_load((project / "params.yaml").read_text())["models"][-1] == "ctc"
