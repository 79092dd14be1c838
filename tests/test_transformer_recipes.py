"""Transformers get the recipes the maintained tools document for them: ORT's transformer
optimizer (fused attention), dynamic INT8 of the fused MatMul/Attention per channel, static QDQ on
weight MatMuls only, NNCF's transformer model type. Checked on a small BERT through the real export."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from pipeline.core import layout
from pipeline.core.config import Params
from pipeline.core.data import DataSet
from pipeline.core.errors import ConfigError, NotApplicable
from pipeline.core.evaluate import fidelity_block
from pipeline.core.records.source import Family
from pipeline.optimize.passes.base import BuildContext
from pipeline.optimize.passes.onnxruntime.optimize import optimizer_type
from pipeline.prepare.export import export_model
from pipeline.prepare.family import detect
from tests.conftest import build, models_from

REPO = Path(__file__).parents[1]
BERT = {
    "source": "torch",
    "factory": "models.minilm_l6.net:build",
    "factory_args": {"vocab_size": 200, "hidden": 64, "layers": 2, "heads": 4, "intermediate": 128},
    "torch_exporter": "torchscript",
    "inputs": {
        "input_ids": {"shape": ["batch", "seq"], "dtype": "int64", "kind": "token_ids"},
        "attention_mask": {"shape": ["batch", "seq"], "dtype": "int64", "kind": "attention_mask"},
    },
    "outputs": ["embedding"],
    "dims": {"seq": 16},
}


@pytest.fixture(scope="module")
def bert(tmp_path_factory) -> BuildContext:
    root = tmp_path_factory.mktemp("bert")
    shutil.copytree(REPO / "models" / "minilm_l6", root / "models" / "minilm_l6")
    (root / "models" / "__init__.py").touch()
    (root / "models" / "bert").mkdir()
    catalog = {"models": ["bert"], "catalog": {"bert": BERT}, "variants": {"onnx_fp32": {}}}
    params = Params.model_validate(catalog | {"export": {"generated_samples": 64}})
    with models_from(root):
        assert export_model("bert", params, root)["status"] == "ok"
    return BuildContext("bert", params.model("bert"), root, root / "out")


def built(ctx: BuildContext, variant: str, folder: str = "", **params) -> tuple[dict, dict]:
    """Build `variant` into a fresh folder; its details and its fidelity on the scoring rows."""
    out = ctx.out_dir.parent / (folder or variant)
    out.mkdir()
    ctx = BuildContext(ctx.model, ctx.config, ctx.root, out)
    result = build(ctx, variant, **params)
    reference = DataSet.load(ctx.source_dir / layout.REFERENCE)
    if variant.startswith("openvino"):
        return result.details, {}
    session = ort.InferenceSession(str(out / result.entry), providers=["CPUExecutionProvider"])
    outputs = dict(zip(["embedding"], session.run(None, reference.inputs), strict=True))
    return result.details, fidelity_block(reference.outputs, outputs, None, embedding=True)["embedding"]


def test_family_is_detected_with_heads_and_hidden_size_from_the_model(bert):
    assert bert.family.model_type == "transformer" and bert.transformer
    assert bert.family.num_heads == 4 and bert.family.hidden_size == 64 and bert.family.architecture == "bert"
    assert detect(Counter({"Softmax": 2, "MatMul": 16, "LayerNormalization": 5}))[0] == "transformer"  # dynamo's
    assert detect(Counter({"Conv": 3, "Relu": 3, "MatMul": 1}))[0] == "cnn"
    assert detect(Counter({"Gemm": 2, "Relu": 1}))[0] == "other"


def test_a_graph_whose_work_is_in_matmuls_is_no_cnn_for_one_small_conv(tmp_path):
    """magika's shape: a small Conv over the input, then large dense layers; the multiply-accumulates
    decide, not the presence of a Conv (which skipped its dynamic INT8 as 'a convolutional model')."""
    from onnx import TensorProto, helper, numpy_helper

    from pipeline.prepare.family import model_family

    def graph(conv_channels: int, hidden: int) -> Path:
        rng = np.random.default_rng(0)
        weights = [
            numpy_helper.from_array(rng.standard_normal((conv_channels, 1, 3)).astype(np.float32), "k"),
            numpy_helper.from_array(rng.standard_normal((conv_channels * 64, hidden)).astype(np.float32), "w1"),
            numpy_helper.from_array(rng.standard_normal((hidden, 10)).astype(np.float32), "w2"),
            numpy_helper.from_array(np.array([0, -1], np.int64), "flat"),
        ]
        nodes = [
            helper.make_node("Conv", ["x", "k"], ["c"], pads=[1, 1]),
            helper.make_node("Reshape", ["c", "flat"], ["f"]),
            helper.make_node("MatMul", ["f", "w1"], ["h"]),
            helper.make_node("MatMul", ["h", "w2"], ["y"]),
        ]
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 1, 64])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 10])
        model = helper.make_model(helper.make_graph(nodes, "g", [x], [y], weights),
                                  opset_imports=[helper.make_opsetid("", 17)])  # fmt: skip
        path = tmp_path / f"g{conv_channels}_{hidden}.onnx"
        onnx.save(model, path)
        return path

    dense = model_family(graph(4, 512), "auto", {}, {"x": (1, 1, 64)})
    assert dense.model_type == "other" and "1 Conv doing only" in dense.how, dense
    convolutional = model_family(graph(256, 2), "auto", {}, {"x": (1, 1, 64)})
    assert convolutional.model_type == "cnn" and "of the multiply-accumulates" in convolutional.how
    assert model_family(graph(4, 512), "auto", {}).model_type == "cnn"  # no shapes known: the count, as before


def test_onnx_opt_fuses_attention_and_keeps_the_function(bert):
    details, fidelity = built(bert, "onnx_opt")
    assert details["fused_ops"]["Attention"] == 2 and details["fused_ops"]["SkipLayerNormalization"] >= 2
    why = "auto: the model's architecture (bert)"
    assert details["transformer_optimizer"] == {"model_type": "bert", "why": why, "num_heads": 4, "hidden_size": 64}
    assert fidelity["cosine_min"] > 0.9999


def test_the_optimizer_takes_the_architecture_when_ort_has_fusions_for_it():
    assert optimizer_type(Family(architecture="vit")) == ("vit", "auto: the model's architecture (vit)")
    assert optimizer_type(Family(architecture="mamba")) == ("bert", "auto: no ORT fusions for mamba, bert")
    assert optimizer_type(Family()) == ("bert", "auto: architecture unknown, bert")
    assert optimizer_type({"architecture": "vit"}, "gpt2") == ("gpt2", "configured")


def test_dynamic_int8_quantizes_the_fused_graph_per_channel(bert):
    details, fidelity = built(bert, "onnx_int8_dynamic")
    assert details["recipe"].startswith("transformer") and details["per_channel"] is True
    assert details["fused_ops"]["Attention"] == 2
    graph = onnx.load(str(bert.out_dir.parent / "onnx_int8_dynamic" / "model.onnx")).graph
    ops = Counter(n.op_type for n in graph.node)
    assert ops["QAttention"] == 2 and ops["DynamicQuantizeMatMul"] + ops["MatMulInteger"] >= 4
    assert fidelity["cosine_mean"] > 0.99


def test_static_int8_leaves_softmax_layernorm_and_attention_scores_in_float(bert):
    details, fidelity = built(bert, "onnx_int8_static", calibration_samples=32)
    assert details["recipe"].startswith("transformer") and details["op_types"] == ["MatMul"]
    graph = onnx.load(str(bert.out_dir.parent / "onnx_int8_static" / "model.onnx")).graph
    dequantized = {n.output[0] for n in graph.node if n.op_type == "DequantizeLinear"}
    fed = Counter(n.op_type for n in graph.node for i in n.input if i in dequantized)
    assert not fed.keys() & {"Softmax", "LayerNormalization", "Gelu", "Mul", "Transpose"}
    quantized_matmuls = {n.name for n in graph.node if n.op_type == "MatMul" and set(n.input) & dequantized}
    assert len(quantized_matmuls) == 12 and len(details["nodes_to_exclude"]) == 4  # 6 weight + 2 score MatMuls a layer
    assert not quantized_matmuls & set(details["nodes_to_exclude"])
    quantized_from = {n.input[0] for n in graph.node if n.op_type == "QuantizeLinear"}
    producers = Counter(n.op_type for n in graph.node if set(n.output) & quantized_from)
    assert "MatMul" not in producers  # no MatMul output (attention scores, projections) is quantized
    assert fidelity["cosine_mean"] > 0.99


def test_nncf_uses_the_transformer_model_type(bert):
    details, _ = built(bert, "openvino_int8", subset_size=32)
    assert details["model_type"] == "transformer" and details["fake_quantize_ops"] > 0
    assert details["preset"] == "mixed"  # auto: NNCF's transformer default (asymmetric activations), not forced


def test_nodes_to_exclude_must_name_nodes_of_the_export(bert):
    with pytest.raises(ConfigError, match=r"nodes_to_exclude .*no_such_node not in the graph"):
        built(bert, "onnx_int8_static", "misspelt", nodes_to_exclude=["no_such_node"])


def test_every_int8_recipe_separates_from_a_destroyed_output(bert):
    reference = DataSet.load(bert.source_dir / layout.REFERENCE).outputs["embedding"]
    destroyed = np.random.default_rng(0).standard_normal(reference.shape).astype(np.float32)
    assert fidelity_block({"e": reference}, {"e": destroyed}, None)["e"]["cosine_mean"] < 0.5


def test_static_int8_keeps_the_lowest_sqnr_layers_float_until_the_validation_score_holds(bert):
    from pipeline.optimize.passes.onnxruntime.sensitivity import goal_figure

    details, _ = built(bert, "onnx_int8_static_search", "sensitive", target_score=0.999999, max_excluded=2)
    search = details["sensitivity"]
    assert [t["excluded_tensors"] for t in search["tries"]] == [0, 1, 2]  # unreachable target: every step tried
    sqnr = [r["sqnr_db"] for r in search["ranking"]]
    assert sqnr == sorted(sqnr) and search["validation_rows"] == len(bert.validation())
    graph = onnx.load(str(bert.out_dir.parent / "sensitive" / "model.onnx")).graph
    matmuls = {n.name for n in graph.node if n.op_type == "MatMul"}
    assert set(search["excluded_nodes"]) <= matmuls and len(search["excluded_nodes"]) >= search["kept"]
    best = max(search["tries"], key=lambda t: t["validation_figure"])
    assert search["kept"] == best["excluded_tensors"]  # the best try is the artifact on disk, re-measured:
    on_disk = goal_figure(bert.out_dir.parent / "sensitive" / "model.onnx", bert.search_goal(), 32)
    assert on_disk == pytest.approx(best["validation_figure"], abs=1e-5)
    assert "not reached" in search["note"] and search["searched"].startswith("the worst output's decision score")

    # the plain recipe already keeps the target: the fallback would only rebuild onnx_int8_static
    kept = r"nothing to search: its recipe already keeps target_score 0\.5 \(0\.\d+\) on the \d+ validation rows"
    with pytest.raises(NotApplicable, match=kept):
        built(bert, "onnx_int8_static_search", "lenient", target_score=0.5)


def test_sensitivity_search_keeps_fewer_float_layers_on_a_tie(monkeypatch, tmp_path):
    """Equal validation cosines: the try with fewer layers in float is the one kept (and rewritten)."""
    from pipeline.optimize.passes.onnxruntime import sensitivity as ort_sensitivity

    written: list[list[str]] = []
    cosines = {0: 0.90, 1: 0.97, 2: 0.97, 4: 0.96}

    def quantize(nodes: list[str]) -> Path:
        written.append(nodes)
        return tmp_path / str(len(nodes))

    ranking = [{"tensor": f"t{i}", "sqnr_db": float(i), "nodes": [f"n{i}"]} for i in range(4)]
    monkeypatch.setattr(ort_sensitivity, "goal_figure", lambda model, *a, **k: cosines[int(Path(model).name)])
    monkeypatch.setattr(ort_sensitivity, "ranked_activations", lambda *a, **k: ranking)

    class Rows(SimpleNamespace):  # the validation rows: only their count and head are read here
        def __len__(self) -> int:
            return 16

    rows = Rows(inputs={}, head=lambda n: rows)
    found = ort_sensitivity.restore_until(quantize, tmp_path / "f.onnx", SimpleNamespace(rows=rows), 1, None, 0.99, 4)
    assert [t["excluded_tensors"] for t in found["tries"]] == [0, 1, 2, 4]
    assert found["kept"] == 1 and found["excluded_nodes"] == ["n0"] and written[-1] == ["n0"]


def run_openvino(out: Path, entry: str, config: dict, inputs: dict) -> np.ndarray:
    from pipeline import runtimes

    return runtimes.load("openvino", out / entry, 1, config).run(inputs)["embedding"]


def test_run_time_quantized_int8_variants_keep_the_encoders_answers_and_say_what_ran(bert):
    """Weights INT8, activations quantized at run time (per block / per group): built, run, close to
    FP32, and the check that activations really were quantized read from the runtime's outputs."""
    details, fidelity = built(bert, "onnx_int8_blockwise", block_size=32)
    assert details["matmuls_rewritten"] > 0 and details["accuracy_level"] == 4
    assert isinstance(details["activations_quantized_at_run_time"], bool)
    assert "calibration batch" in details["activations_check"]
    assert fidelity["cosine_min"] > 0.99 and fidelity["neighbour_recall"] is not None

    details, _ = built(bert, "openvino_int8_dynamic", group_size=32)
    assert details["int8_weight_tensors"] > 0 and details["group_size"] == 32
    out = bert.out_dir.parent / "openvino_int8_dynamic"
    config = {"inference_precision": "f32", "dynamic_quantization_group_size": 32}
    reference = DataSet.load(bert.source_dir / layout.REFERENCE)
    got = run_openvino(out, "model.xml", config, reference.inputs)
    assert fidelity_block(reference.outputs, {"embedding": got}, None)["embedding"]["cosine_min"] > 0.99
    # the group size travels with the IR: a plain OpenVINO compile of it reads it from rt_info
    import openvino as ov

    compiled = ov.Core().compile_model(str(out / "model.xml"), "CPU")
    assert int(compiled.get_property("DYNAMIC_QUANTIZATION_GROUP_SIZE")) == 32
