"""Each rescue (pipeline.core.rescues) on a synthetic model that shows its symptom: the remedy is used,
the record says so, and any other failure stays a failure."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import onnx
import pytest
import yaml

from pipeline.core import layout, rescues
from pipeline.core.config import PARAMS_FILE
from tests.conftest import build


def test_every_rescue_names_an_installed_library_and_is_in_the_users_table():
    table = (Path(__file__).parents[1] / "docs" / "variants.md").read_text()
    for rescue in rescues.RESCUES:
        assert rescue.symptom and rescue.remedy and rescue.errors, rescue.name
        assert rescues.installed(rescue.package) != "not installed", (rescue.name, rescue.package)
        assert f"| `{rescue.name}` |" in table, f"docs/variants.md's rescue table has no row for {rescue.name}"
    assert set(rescues.CRASH_SIGNALS) <= set(rescues.BY_NAME["crash_conservative_runtime"].errors)


def test_static_int8_retries_a_known_quantizer_defect_with_its_documented_option(context, monkeypatch):
    """ORT's QDQ quantizer fails inside _adjust_weight_scale_for_int32_bias on some exporters' graphs:
    rescue ort_int32_bias_scale retries with QDQDisableWeightAdjustForInt32Bias and the record says so;
    the same text raised elsewhere stays a failure."""
    import onnxruntime.quantization as quantization

    real, seen = quantization.quantize_static, []

    def _adjust_weight_scale_for_int32_bias():
        raise ValueError("The truth value of an array with more than one element is ambiguous. Use a.any()")

    def flawed(*args, extra_options=None, **kwargs):
        seen.append(dict(extra_options or {}))
        if not (extra_options or {}).get("QDQDisableWeightAdjustForInt32Bias"):
            _adjust_weight_scale_for_int32_bias()
        return real(*args, extra_options=extra_options, **kwargs)

    monkeypatch.setattr(quantization, "quantize_static", flawed)
    result = build(context, "onnx_int8_static", calibration_samples=16)
    [rescue] = result.rescues
    assert rescue["rescue"] == "ort_int32_bias_scale" and len(seen) == 2
    assert rescue["setting"] == {"QDQDisableWeightAdjustForInt32Bias": True}
    assert rescue["library"].startswith("onnxruntime 1.") and rescue["seen"].startswith("ValueError: The truth")

    def other(*args, **kwargs):
        raise ValueError("The truth value of an array with more than one element is ambiguous.")  # not in that frame

    monkeypatch.setattr(quantization, "quantize_static", other)
    with pytest.raises(ValueError, match="truth value"):
        build(context, "onnx_int8_static", calibration_samples=16)


def break_after_quantizing(path: str) -> None:
    """What ORT's QDQ quantizer wrote for a tf2onnx Conv1D: a Transpose whose perm does not fit its input."""
    model = onnx.load(path)
    output = model.graph.output[0].name
    producer = next(node for node in model.graph.node if output in node.output)
    producer.output[list(producer.output).index(output)] = output + "_before"
    model.graph.node.append(onnx.helper.make_node("Transpose", [output + "_before"], [output], perm=[0, 2, 3, 1]))
    onnx.save(model, path)


@pytest.mark.parametrize("variant", ["onnx_int8_static", "onnx_int8_static_search"])
def test_a_quantized_graph_onnx_runtime_cannot_load_is_quantized_again_as_qoperator(context, monkeypatch, variant):
    import onnxruntime.quantization as quantization
    from onnxruntime.quantization import QuantFormat

    from pipeline.optimize.passes.onnxruntime import sensitivity

    real, formats = quantization.quantize_static, []

    def writes_unloadable_qdq(model, output, *args, quant_format=QuantFormat.QDQ, **kwargs):
        formats.append(quant_format)
        real(model, output, *args, quant_format=quant_format, **kwargs)
        if quant_format == QuantFormat.QDQ:
            break_after_quantizing(output)

    monkeypatch.setattr(quantization, "quantize_static", writes_unloadable_qdq)
    monkeypatch.setattr(sensitivity, "goal_figure", lambda *args, **kwargs: 0.5)  # a search that never reaches it
    result = build(context, variant, calibration_samples=16, **({"max_excluded": 2} if "search" in variant else {}))
    [rescue] = result.rescues
    assert rescue["rescue"] == "ort_qdq_unloadable" and "Transpose" in rescue["seen"]
    assert result.details["format"] == "qoperator" and formats[:2] == [QuantFormat.QDQ, QuantFormat.QOperator]
    assert set(formats[1:]) == {QuantFormat.QOperator}  # a search's later tries keep the remedy
    if "search" in variant:  # QOperator has no Q/DQ pair per activation: the search says it had nothing to rank
        assert result.details["sensitivity"]["note"].startswith("nothing to rank")
    ops = {node.op_type for node in onnx.load(str(context.out_dir / result.entry)).graph.node}
    assert any(op.startswith(("QLinear", "QGemm")) for op in ops)  # QOperator's fused integer operators

    def always_unloadable(model, output, *args, **kwargs):
        real(model, output, *args, **kwargs)
        break_after_quantizing(output)

    monkeypatch.setattr(quantization, "quantize_static", always_unloadable)
    with pytest.raises(Exception, match="Transpose"):  # QOperator fails too: the build fails, with ORT's words
        build(context, "onnx_int8_static", calibration_samples=16)


SIGFPE_BELOW_F32 = """
import os, signal
import openvino

_compile = openvino.Core.compile_model

def compile_model(self, model, device=None, config=None, **kwargs):
    if (config or {}).get("INFERENCE_PRECISION_HINT") != "f32":
        os.kill(os.getpid(), signal.SIGFPE)  # as OpenVINO 2026.4's CPU plugin did on an AMX Xeon
    return _compile(self, model, device, config, **kwargs)

openvino.Core.compile_model = compile_model
"""


@pytest.mark.slow
def test_a_build_killed_by_a_signal_is_built_again_with_the_runtimes_conservative_setting(
    tiny_project, monkeypatch, tmp_path
):
    """The symptom of issue 53 on an Intel Xeon with AMX: OpenVINO's CPU plugin killed the build's load
    check by SIGFPE unless inference ran in f32. Every child of this test gets that plugin. Slow (about
    10 s on 2 cores): it exports the tiny model and builds an OpenVINO variant three times, each in a child."""
    from pipeline.optimize.stage import build_variant
    from pipeline.prepare.export import export_model
    from tests.conftest import tiny_config
    from tests.test_export_failures import params_for

    params = params_for(tiny=tiny_config()).model_copy(update={"variants": {"openvino_fp16": {}}})
    (tiny_project / PARAMS_FILE).write_text(yaml.safe_dump(params.model_dump(mode="json", exclude_defaults=True)))
    export_model("tiny", params, tiny_project)
    flawed = tmp_path / "flawed_plugin"
    flawed.mkdir()
    (flawed / "sitecustomize.py").write_text(SIGFPE_BELOW_F32)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(flawed), *sys.path]))

    record = build_variant("tiny", "openvino_fp16", params, tiny_project)
    assert record.status == "ok", record.reason
    [rescue] = record.build.rescues
    assert rescue["rescue"] == "crash_conservative_runtime" and "killed by SIGFPE" in rescue["seen"]
    assert rescue["setting"] == {"inference_precision": "f32"} and rescue["library"].startswith("openvino 20")
    saved = json.loads((layout.variant_dir("tiny", "openvino_fp16", tiny_project) / "build.json").read_text())
    assert saved["runtime_config"]["inference_precision"] == "f32"  # the bench and the server load it so

    always = SIGFPE_BELOW_F32.replace('if (config or {}).get("INFERENCE_PRECISION_HINT") != "f32":', "if True:")
    (flawed / "sitecustomize.py").write_text(always)
    record = build_variant("tiny", "openvino_fp16", params, tiny_project)
    assert record.status == "failed" and "killed by SIGFPE" in record.reason
    retried = "built again with openvino's conservative setting (inference_precision=f32): process killed by SIGFPE"
    assert retried in record.reason


def test_a_training_scripts_checkpoint_dict_is_read_by_its_usual_keys(tiny_project):
    """{"step", "model_state" (saved from DataParallel: 'module.' keys), "optimizer_state"}: the common
    training-script layout loads, and the source says which key it used; a dict holding no entry that
    fits stays the clean refusal it was."""
    import torch

    from pipeline.core.errors import ModelFileError
    from pipeline.prepare.sources.pytorch import TorchSource
    from tests.conftest import tiny_config

    weights = tiny_project / "models" / "tiny" / "weights.pt"
    state = torch.load(weights, weights_only=True)
    optimizer = {"state": {0: {"exp_avg": torch.zeros(3)}}, "param_groups": [{"lr": 1e-3}]}
    checkpoint = {
        "step": 1200,
        "model_state": {f"module.{k}": v for k, v in state.items()},
        "optimizer_state": optimizer,
    }
    torch.save(checkpoint, weights)
    source = TorchSource("tiny", tiny_config(), tiny_project)
    [rescue] = source.rescues
    assert rescue["rescue"] == "checkpoint_dict" and rescue["used"] == "key 'model_state', prefix 'module.' removed"
    assert rescue["seen"].startswith("RuntimeError: Missing key(s) in state_dict")
    loaded = source.module.state_dict()
    assert all(torch.equal(loaded[name], value) for name, value in state.items())

    torch.save({"step": 1, "weights": state}, weights)  # no usual key: nothing is guessed
    with pytest.raises(ModelFileError, match=r"does not fit models\.tiny\.net:build"):
        TorchSource("tiny", tiny_config(), tiny_project)

    # the training loss's own parameters beside the model's (Resemblyzer's pretrained.pt): left out, and said
    loss = {"similarity_weight": torch.tensor([10.0]), "similarity_bias": torch.tensor([-5.0])}
    torch.save({"step": 1, "model_state": state | loss, "optimizer_state": optimizer}, weights)
    [rescue] = TorchSource("tiny", tiny_config(), tiny_project).rescues
    assert rescue["used"] == "key 'model_state', similarity_bias, similarity_weight left out (not the module's)"
    missing = dict(list(state.items())[1:]) | loss  # a key of the module's absent: still refused
    torch.save({"step": 1, "model_state": missing}, weights)
    with pytest.raises(ModelFileError, match=r"does not fit models\.tiny\.net:build"):
        TorchSource("tiny", tiny_config(), tiny_project)


def write_saved_model_with_optimizer_slots(folder: Path) -> None:
    """A SavedModel whose object graph holds an optimizer's slot variables, as Keras 2 wrote its models
    with their optimizer state: TF >= 2.16 (without tf_keras) revives the optimizer as a plain object
    and fails ('_UserObject' object has no attribute 'add_slot'). TensorFlow alone writes it."""
    import tensorflow as tf

    class Transcriber(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.kernel = tf.Variable(tf.random.stateless_normal((16, 3), seed=(0, 1)))
            self.optimizer = tf.compat.v1.train.AdamOptimizer(0.01)  # its m and v slots are saved with it

        @tf.function(input_signature=[tf.TensorSpec([None, 16], tf.float32, name="audio")])
        def serve(self, audio: tf.Tensor) -> dict[str, tf.Tensor]:
            return {"onsets": tf.sigmoid(tf.matmul(audio, self.kernel))}

    model = Transcriber()
    model.optimizer.minimize(lambda: tf.reduce_sum(model.serve(tf.ones((2, 16)))["onsets"]), var_list=[model.kernel])
    tf.saved_model.save(model, str(folder), signatures={"serving_default": model.serve})


def test_a_saved_model_with_optimizer_slots_is_read_by_the_tf1_loader(tmp_path):
    """The TF1 loader runs its serving signature, tf2onnx converts the frozen graph, and the tf_graph
    runtime serves the folder as it is."""
    import numpy as np
    import onnxruntime as ort

    from pipeline.core.config import ExportConfig
    from pipeline.prepare.sources.tfkeras import SavedModelSource
    from pipeline.runtimes.tf_rt import Config, TfSession
    from tests.conftest import tiny_config

    folder = tmp_path / "models" / "transcriber" / "saved"
    write_saved_model_with_optimizer_slots(folder)
    config = tiny_config(source="savedmodel", factory=None, file="saved", metric="none", eval_data=None,
                         inputs={"audio": {"shape": ["batch", 16]}})  # fmt: skip
    source = SavedModelSource("transcriber", config, tmp_path)
    [rescue] = source.rescues
    assert rescue["rescue"] == "tf_keras2_saved_model" and "add_slot" in rescue["seen"]
    assert rescue["library"].startswith("tensorflow 2.")  # installed as tensorflow-cpu: the module's version
    audio = np.random.default_rng(1).random((5, 16), dtype=np.float32)
    expected = source.predict({"audio": audio})
    assert list(expected) == ["onsets"] and expected["onsets"].shape == (5, 3)

    source.export_onnx(tmp_path / "model.onnx", ExportConfig())  # tf2onnx from the wrapped graph
    session = ort.InferenceSession(str(tmp_path / "model.onnx"), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["audio"] and [o.name for o in session.get_outputs()] == ["onsets"]
    np.testing.assert_allclose(session.run(None, {"audio": audio})[0], expected["onsets"], atol=1e-5)

    source.serving_module(jit=False).save(tmp_path / "tf_graph")  # the tf_graph variant: a TF2 SavedModel again
    runtime = TfSession(tmp_path / "tf_graph", 1, Config())
    np.testing.assert_allclose(runtime.run({"audio": audio})["onsets"], expected["onsets"], atol=1e-6)


def test_nncf_accuracy_control_failing_inside_nncf_falls_back_to_the_ranked_search(context, monkeypatch):
    """NNCF's accuracy control crashed in its graph traversal on a CTC recogniser (KeyError: 414): ONNX
    Runtime's ranking on the exported ONNX picks what stays in float and nncf.quantize runs with it, each
    try judged on the validation rows; the record says so. Our own stop (SearchStopped) is no such crash."""
    import nncf

    def get_next_nodes(*args, **kwargs):
        raise KeyError(414)  # as nncf/common/graph/graph.py did

    monkeypatch.setattr(nncf, "quantize_with_accuracy_control", get_next_nodes)
    result = build(context, "openvino_int8_acc", max_drop=1e-6, subset_size=16)  # only the float model reaches it
    details = result.details
    [rescue] = result.rescues
    assert rescue["rescue"] == "nncf_accuracy_control_crash" and rescue["seen"] == "KeyError: 414"
    assert details["stopped_by"] == "ranked_fallback" and details["validation_origin"] == "validation"
    tries = details["tries"]
    assert [t["excluded_tensors"] for t in tries][:2] == [0, 1] and len(tries) >= 2
    assert details["ranked_nodes_found"] == details["ranked_nodes"] > 0  # ONNX node names found in the IR
    assert tries[-1]["validation_figure"] > tries[0]["validation_figure"] and details["reached_max_drop"]
    assert details["validation_int8"] == details["validation_fp32"] and details["float_operations"]
    assert (context.out_dir / result.entry).exists()


def write_if_on_scalar_model(path: Path) -> None:
    """x [batch, 4, 8] and a scalar sr (as silero-vad's sample rate): If(sr == 16000) passes x on, else
    flattens it, and a Conv reads the If; OpenVINO's ONNX front end cannot give that Conv's input a rank."""
    from onnx import TensorProto, helper, numpy_helper

    def branch(name: str, node: onnx.NodeProto) -> onnx.GraphProto:
        return helper.make_graph(
            [node], name, [], [helper.make_tensor_value_info(node.output[0], TensorProto.FLOAT, None)]
        )

    weights = np.random.default_rng(0).standard_normal((2, 4, 3)).astype(np.float32)
    k, flat = np.array(16000, np.int64), np.array([-1], np.int64)
    initializers = [
        numpy_helper.from_array(k, "k"),
        numpy_helper.from_array(flat, "flat"),
        numpy_helper.from_array(weights, "W"),
    ]
    nodes = [
        helper.make_node("Equal", ["sr", "k"], ["c"]),
        helper.make_node(
            "If",
            ["c"],
            ["b"],
            then_branch=branch("then", helper.make_node("Identity", ["x"], ["t"])),
            else_branch=branch("else", helper.make_node("Reshape", ["x", "flat"], ["e"])),
        ),
        helper.make_node("Conv", ["b", "W"], ["y"]),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4, 8]),
              helper.make_tensor_value_info("sr", TensorProto.INT64, [])]  # fmt: skip
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 2, 6])]
    model = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, initializers),
                              opset_imports=[helper.make_opsetid("", 17)])  # fmt: skip
    model.ir_version = 8
    onnx.save(model, path)


def test_an_if_on_a_scalar_input_with_one_known_value_is_folded_before_openvino_converts_it(tmp_path):
    import nncf
    import onnxruntime as ort
    import openvino as ov

    from pipeline.core.config import InputSpec
    from pipeline.core.data import DataSet
    from pipeline.core.inputs import to_model_layout
    from pipeline.optimize.passes.openvino.convert import Fp32Config, convert, save
    from pipeline.optimize.passes.openvino.quantize import calibration_dataset

    path = tmp_path / "model.onnx"
    write_if_on_scalar_model(path)
    rows = {"x": np.random.default_rng(1).standard_normal((6, 4, 8)).astype(np.float32), "sr": np.full(6, 16000)}
    with pytest.raises(Exception, match="rank has to be known"):
        ov.convert_model(path)  # the symptom
    specs = {"x": InputSpec(shape=["batch", 4, 8]), "sr": InputSpec(shape=[], dtype="int64", value=16000)}
    ctx = SimpleNamespace(exported_onnx=path, config=SimpleNamespace(inputs=specs, source="onnx"), out_dir=tmp_path,
                          reference=lambda: DataSet(rows), calibration=lambda: DataSet(rows), fixed_batch=None,
                          model_inputs=lambda chunk: to_model_layout(chunk, specs))  # fmt: skip

    model = convert(ctx, "onnx")
    assert [port.get_any_name() for port in model.inputs] == ["x"]  # sr is the constant 16000 now
    expected = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, ctx.model_inputs(rows))[0]
    got = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})({"x": rows["x"]})
    np.testing.assert_allclose(next(iter(got.values())), expected, atol=1e-5)
    quantized = nncf.quantize(model, calibration_dataset(ctx, model), subset_size=6)  # sr is not fed to it
    for built in (model, quantized):  # the record travels with the model through NNCF to save()
        [rescue] = save(ctx, built, compress_to_fp16=False, config=Fp32Config()).rescues
        assert rescue["rescue"] == "if_on_known_scalar" and rescue["specialised_to"] == {"sr": 16000}
        assert rescue["seen"] == "OpConversionFailure: The input data tensor's rank has to be known (static)"


def test_calibration_batches_are_never_padded_past_the_rows_they_hold(context, monkeypatch):
    """ppocr_det's 22 GB: its 2 calibration rows of 736x736 pages were padded to the memory-capped batch of
    29 rows. A batch holds at most the rows there are (a fixed batch is still filled up to its size)."""
    import onnxruntime.quantization as quantization

    real, batches = quantization.quantize_static, []

    def spying(model, output, calibration_data_reader, *args, **kwargs):
        batches.extend(len(next(iter(b.values()))) for b in calibration_data_reader._batches)
        return real(model, output, calibration_data_reader, *args, **kwargs)

    monkeypatch.setattr(quantization, "quantize_static", spying)
    build(context, "onnx_int8_static", calibration_samples=3, calibration_batch=32)
    assert batches == [3]  # not one batch of 32 rows, 29 of them repeats
