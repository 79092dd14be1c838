"""Model repositories for Triton, OVMS and KServe (pipeline.serve.repositories) written from a tiny deploy
folder: the measured settings land where each engine reads them, and each check catches a broken field."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import yaml
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from pipeline.cli import main
from pipeline.core.config import ServingConfig
from pipeline.core.errors import ModelFileError
from pipeline.core.files import sha256
from pipeline.core.records import manifest as manifest_record
from pipeline.core.records.manifest import Manifest
from pipeline.serve.repositories import triton
from pipeline.serve.repositories.check import check_analyzer, check_kserve, check_ovms, check_triton
from pipeline.serve.repositories.write import locales_asked, readme, write_serving
from pipeline.serve.signature import numpy_dtype, read_signature, triton_type, v2_datatype
from tests.helpers import metric
from tests.pipeline_runs import write_tiny_onnx

UNCHECKED = ServingConfig(check_versions=False)  # tests/test_serving_releases.py loads them in each release
MODEL = "tiny_net"  # '_' so the InferenceService name has to change it
SWEEP = {"peak": 40000.0, "peak_batch": 32, "by_batch": {"b1": 10000.0, "b8": 30000.0, "b32": 40000.0}}
CLEAR = {  # b8 and b32 beyond b1's interval: batching pays
    "b1": {"low": 9800.0, "high": 10200.0, "half_width_pct": 2.0, "blocks": 6},
    "b8": {"low": 29000.0, "high": 31000.0, "half_width_pct": 3.3, "blocks": 6},
    "b32": {"low": 38000.0, "high": 42000.0, "half_width_pct": 5.0, "blocks": 6},
}
FLAT = {k: {"low": 9000.0, "high": 11000.0, "half_width_pct": 10.0, "blocks": 6} for k in ("b1", "b8", "b32")}
ORT_RUN = {
    "throughput_concurrent": {"sps": 18000.0, "batch": 1, "total_threads": 4, "requests": 2,
                              "harness_limit_sps": 400000.0, "harness_bound": False,
                              "how": "2 sessions of 2 intra-op thread(s), one per request thread"},
    "runtime_settings": {"provider": "CPUExecutionProvider", "intra_op_threads": 4, "graph_optimization": "all"},
}  # fmt: skip
OPENVINO_RUN = {
    "throughput_concurrent": {"sps": 20000.0, "batch": 1, "total_threads": 4, "requests": 4, "streams": 2,
                              "harness_limit_sps": 400000.0, "harness_bound": False,
                              "threads": 4, "how": "OpenVINO AsyncInferQueue, THROUGHPUT hint"},
    "runtime_settings": {"device": "CPU", "inference_precision": "f32", "inference_precision_requested": "auto",
                         "inference_num_threads": 4, "dynamic_quantization_group_size": 32},
}  # fmt: skip


def deploy(
    root: Path, runtime: str = "onnxruntime", fixed_batch: int | None = None, ci: dict = CLEAR, **fields
) -> Path:
    """deploy/tiny_net/ as the select step writes it: x [batch, 12] -> MatMul, Add -> output [batch, 3]
    (an ONNX file, or OpenVINO IR converted from it), and a manifest with plausible measurements."""
    import onnx

    folder = root / "deploy" / MODEL
    write_tiny_onnx(folder / "model.onnx")
    if fixed_batch is not None:
        model = onnx.load(str(folder / "model.onnx"))
        for value in (*model.graph.input, *model.graph.output):
            value.type.tensor_type.shape.dim[0].dim_value = fixed_batch
        onnx.save(model, str(folder / "model.onnx"))
    entry = "model.onnx"
    if runtime == "openvino":
        import openvino as ov

        ov.save_model(ov.convert_model(str(folder / "model.onnx")), str(folder / "model.xml"), compress_to_fp16=False)
        (folder / "model.onnx").unlink()
        entry = "model.xml"
    measured = ORT_RUN if runtime == "onnxruntime" else OPENVINO_RUN
    record = metric(0.02, runtime=runtime, throughput_sps=SWEEP, throughput_ci=ci,
                    rss_mb_by_batch={"b1": 100.0, "b8": 101.0, "b32": 104.0}, **measured)  # fmt: skip
    manifest = Manifest.model_validate({
        "model": MODEL, "variant": "onnx_fp32" if runtime == "onnxruntime" else "openvino_fp32",
        "machine": "amd-test", "runtime": runtime, "runtime_version": "1.0", "entry": entry,
        "inputs": {"x": {"shape": [fixed_batch or "batch", 12]}}, "fixed_batch": fixed_batch,
        "outputs": ["output"], "metrics": record,
        "files": {p.name: sha256(p) for p in sorted(folder.iterdir())},
    } | fields)  # fmt: skip
    manifest_record.write(manifest, folder)
    return folder


def triton_config(folder: Path) -> tuple[mc.ModelConfig, str]:
    text = (folder / "serving" / "triton" / MODEL / "config.pbtxt").read_text()
    return text_format.Parse(text, mc.ModelConfig()), text


def test_an_onnx_artifact_gets_its_measured_settings_in_every_engine(tmp_path: Path):
    folder = deploy(tmp_path)
    digest = sha256(folder / "model.onnx")

    report = write_serving(folder, UNCHECKED)

    assert [r.engine for r in report.engines if r.written] == ["triton", "ovms", "kserve"]
    config, text = triton_config(folder)
    assert (config.name, config.backend, config.max_batch_size) == (MODEL, "onnxruntime", 32)
    assert [(t.name, mc.DataType.Name(t.data_type), list(t.dims)) for t in (*config.input, *config.output)] == [
        ("x", "TYPE_FP32", [12]),
        ("output", "TYPE_FP32", [3]),
    ]
    # as Model Analyzer starts: stack what is queued, no preferred size, no wait
    assert config.HasField("dynamic_batching") and config.dynamic_batching == mc.ModelDynamicBatching()
    assert [(g.count, g.kind) for g in config.instance_group] == [(2, mc.ModelInstanceGroup.KIND_CPU)]
    assert {k: v.string_value for k, v in config.parameters.items()} == {
        "intra_op_thread_count": "2", "inter_op_thread_count": "1", "execution_mode": "0"
    }  # fmt: skip
    assert not config.HasField("optimization")  # graph optimization "all": the backend's default
    assert f"# sha256 1/model.onnx {digest}\n" in text
    assert (
        "# max_batch_size 32: largest batch of the throughput sweep on amd-test (b1 10000, b32 40000 samples/s)" in text
    )
    assert sha256(folder / "serving" / "triton" / MODEL / "1" / "model.onnx") == digest

    ovms = json.loads((folder / "serving" / "ovms" / "config.json").read_text())["model_config_list"][0]["config"]
    assert ovms == {"name": MODEL, "base_path": MODEL, "target_device": "CPU", "nireq": 2, "plugin_config": {
        "INFERENCE_NUM_THREADS": "4", "NUM_STREAMS": "2", "INFERENCE_PRECISION_HINT": "f32"}}  # fmt: skip
    provenance = json.loads((folder / "serving" / "ovms" / "provenance.json").read_text())
    assert provenance["sha256"] == {f"{MODEL}/1/model.onnx": digest}
    assert "OVMS runs this ONNX file with OpenVINO" in provenance["note"]

    service = yaml.safe_load((folder / "serving" / "kserve" / "triton.yaml").read_text())
    assert service["metadata"]["name"] == "tiny-net-triton"
    model = service["spec"]["predictor"]["model"]
    assert (model["runtime"], model["modelFormat"]["name"], model["protocolVersion"]) == (
        "kserve-tritonserver", "onnx", "v2"
    )  # fmt: skip
    assert model["resources"]["limits"] == {"cpu": "4", "memory": "208M"}  # 104 MB at b32 x 2
    ovms_service = yaml.safe_load((folder / "serving" / "kserve" / "ovms.yaml").read_text())
    assert ovms_service["spec"]["predictor"]["model"]["runtime"] == "kserve-openvino"
    assert ovms_service["metadata"]["name"] == "tiny-net-ovms"  # two services, not one replacing the other
    analyzer = yaml.safe_load((folder / "serving" / "model_analyzer.yaml").read_text())
    assert analyzer["profile_models"][MODEL] == {
        "cpu_only": True,
        "parameters": {"concurrency": [1, 2, 4, 8], "batch_sizes": [1, 32]},
        "model_config_parameters": {
            "instance_group": [{"kind": "KIND_CPU", "count": [1, 2, 4]}],
            "max_batch_size": [32],
            "dynamic_batching": {"max_queue_delay_microseconds": [0, 10, 20, 40]},  # up to 2 x the b1 p50 (20 us)
        },
    }
    readme = (folder / "serving" / "README.md").read_text()
    assert "tritonserver --model-repository=$PWD/triton" in readme and "ovms --config_path" in readme


def test_the_readme_names_the_locale_a_string_graph_asks_for(tmp_path: Path):
    """ONNX Runtime opens a StringNormalizer's graph only where its locale exists: the image serving it must have it."""
    import onnx

    folder = deploy(tmp_path)
    report = write_serving(folder, UNCHECKED)
    assert "locale" not in (folder / "serving" / "README.md").read_text()  # no string operator: nothing to say
    model = onnx.load(str(folder / "model.onnx"))
    model.graph.node.append(onnx.helper.make_node("StringNormalizer", ["text"], ["lowered"], locale="C.UTF-8"))
    model.graph.node.append(onnx.helper.make_node("StringNormalizer", ["text"], ["kept"]))  # none: en_US.UTF-8
    onnx.save(model, str(folder / "model.onnx"))
    manifest = manifest_record.load(folder)
    assert locales_asked(folder, manifest) == ["C.UTF-8", "en_US.UTF-8"]
    text = readme(manifest, report.engines, locales_asked(folder, manifest))
    assert "asks ONNX Runtime for locale C.UTF-8 and en_US.UTF-8: the image an engine runs in must have it" in text
    assert locales_asked(folder, manifest.model_copy(update={"entry": "model.xml"})) == []  # OpenVINO IR


def test_a_fixed_batch_keeps_the_batch_in_dims_and_batches_nothing(tmp_path: Path):
    folder = deploy(tmp_path, fixed_batch=1)

    write_serving(folder, UNCHECKED)

    config, text = triton_config(folder)
    assert config.max_batch_size == 0 and not config.HasField("dynamic_batching")
    assert list(config.input[0].dims) == [1, 12] and list(config.output[0].dims) == [1, 3]
    assert "max_batch_size 0 (dims keep the batch axis): the model fixes its batch to 1" in text


def test_flat_throughput_gets_no_dynamic_batching_and_says_why(tmp_path: Path):
    folder = deploy(tmp_path, ci=FLAT)

    write_serving(folder, UNCHECKED)

    config, text = triton_config(folder)
    assert config.max_batch_size == 32 and not config.HasField("dynamic_batching")
    assert "# no dynamic_batching: no batch above 1 measured clearly more samples/s than batch 1" in text


def test_openvino_ir_gets_the_backend_keys_it_reads_and_the_plugin_settings(tmp_path: Path):
    folder = deploy(tmp_path, runtime="openvino")

    write_serving(folder, UNCHECKED)

    config, text = triton_config(folder)
    assert (config.backend, config.max_batch_size) == ("openvino", 0)  # the backend fixes a batching model's batch
    assert list(config.input[0].dims) == [-1, 12]
    assert [g.count for g in config.instance_group] == [4]
    assert {k: v.string_value for k, v in config.parameters.items()} == {
        "NUM_STREAMS": "2",
        "INFERENCE_NUM_THREADS": "4",
    }  # fmt: skip: the streams THROUGHPUT made, without the hint (OVMS tuning guide: not both)
    assert "INFERENCE_PRECISION_HINT f32 (measured): not written" in text
    assert "DYNAMIC_QUANTIZATION_GROUP_SIZE 32 (measured): not written" in text
    assert {p.name for p in (folder / "serving" / "triton" / MODEL / "1").iterdir()} == {"model.xml", "model.bin"}
    ovms = json.loads((folder / "serving" / "ovms" / "config.json").read_text())["model_config_list"][0]["config"]
    assert ovms["nireq"] == 4 and ovms["plugin_config"] == {
        "INFERENCE_NUM_THREADS": "4", "NUM_STREAMS": "2", "INFERENCE_PRECISION_HINT": "f32",
        "DYNAMIC_QUANTIZATION_GROUP_SIZE": "32",
    }  # fmt: skip
    formats = {
        engine: yaml.safe_load((folder / "serving" / "kserve" / f"{engine}.yaml").read_text())["spec"]["predictor"]
        for engine in ("triton", "ovms")
    }
    assert {e: p["model"]["modelFormat"]["name"] for e, p in formats.items()} == {
        "triton": "triton",
        "ovms": "openvino",
    }


def _replace(old: str, new: str) -> Callable[[str], str]:
    def edit(text: str) -> str:
        assert old in text, f"{old!r} not in the written file"
        return text.replace(old, new, 1)

    return edit


def _ovms_config(edit: Callable[[dict], None]) -> Callable[[str], str]:
    def change(text: str) -> str:
        config = json.loads(text)
        edit(config["model_config_list"][0]["config"])
        return json.dumps(config)

    return change


TRITON = f"triton/{MODEL}/config.pbtxt"
BROKEN = {  # id: (deploy folder kind, file from serving/, edit, what the problem must name)
    "input name": ("dynamic", TRITON, _replace('name: "x"', 'name: "features"'), "input[0].name 'features'"),
    "dtype": ("dynamic", TRITON, _replace("TYPE_FP32", "TYPE_INT64"), "input x data_type TYPE_INT64"),
    "dims": ("dynamic", TRITON, _replace("dims: 12", "dims: 13"), "input x dims [13]"),
    "batch of a fixed batch": ("fixed", TRITON, lambda t: t + "max_batch_size: 4\n", "max_batch_size 4: must be 0"),
    "preferred above max": ("dynamic", TRITON, _replace("dynamic_batching {\n}", "dynamic_batching {\n "
                            "preferred_batch_size: 64\n}"), "dynamic_batching.preferred_batch_size 64"),
    "queue delay": ("dynamic", TRITON, _replace("dynamic_batching {\n}", "dynamic_batching {\n preferred_batch_size: "
                    "32\n max_queue_delay_microseconds: 500\n}"), "max_queue_delay_microseconds 500: every request"),
    "hint beside streams": ("openvino", TRITON, lambda t: t + 'parameters { key: "PERFORMANCE_HINT" value { '
                            'string_value: "THROUGHPUT" } }\n', "parameters.PERFORMANCE_HINT: NUM_STREAMS without"),
    "no instance": ("dynamic", TRITON, _replace("count: 2", "count: 0"), "instance_group[0].count 0"),
    "unknown field": ("dynamic", TRITON, lambda t: t + "max_batch_sizes: 3\n", 'no field named "max_batch_sizes"'),
    "backend": ("dynamic", TRITON, _replace('backend: "onnxruntime"', 'backend: "pytorch"'), "backend 'pytorch'"),
    "unread parameter": ("openvino", TRITON, _replace('key: "NUM_STREAMS"', 'key: "CPU_THROUGHPUT_STREAMS"'),
                         "parameters.CPU_THROUGHPUT_STREAMS"),
    "artifact bytes": ("dynamic", f"triton/{MODEL}/1/model.onnx", None, "1/model.onnx: sha256 differs"),
    "ovms schema": ("dynamic", "ovms/config.json", _ovms_config(lambda c: c.update(sha256="abc")),
                    "$.model_config_list[0].config: Additional properties are not allowed ('sha256'"),
    "ovms base_path": ("dynamic", "ovms/config.json", _ovms_config(lambda c: c.update(base_path="elsewhere")),
                       "base_path 'elsewhere'"),
    "ovms plugin value": ("openvino", "ovms/config.json",
                          _ovms_config(lambda c: c["plugin_config"].update(NUM_STREAMS="8")),
                          "plugin_config.NUM_STREAMS '8': measured '2'"),
    "ovms hint beside streams": ("openvino", "ovms/config.json", _ovms_config(lambda c: c["plugin_config"].update(
        PERFORMANCE_HINT="THROUGHPUT")), "plugin_config.PERFORMANCE_HINT: NUM_STREAMS without"),
    "ovms precision of an onnx file": ("dynamic", "ovms/config.json", _ovms_config(
        lambda c: c["plugin_config"].pop("INFERENCE_PRECISION_HINT")), "plugin_config.INFERENCE_PRECISION_HINT None"),
    "ovms artifact": ("openvino", f"ovms/{MODEL}/1/model.bin", None, "1/model.bin: sha256 differs"),
    "kserve name": ("dynamic", "kserve/triton.yaml", _replace("name: tiny-net-triton", "name: tiny_net"),
                    "metadata.name 'tiny_net'"),
    "kserve shared name": ("dynamic", "kserve/ovms.yaml", _replace("name: tiny-net-ovms", "name: tiny-net-triton"),
                           "metadata.name 'tiny-net-triton': 'tiny-net-ovms'"),
    "analyzer drops the count": ("dynamic", "model_analyzer.yaml",
                                 _replace("count:\n        - 1\n        - 2\n", "count:\n        - 1\n"),
                                 "leaves out the 2 config.pbtxt holds"),
    "kserve protocol": ("dynamic", "kserve/ovms.yaml", _replace("protocolVersion: v2", "protocolVersion: v1"),
                        "protocolVersion 'v1'"),
    "kserve memory": ("dynamic", "kserve/triton.yaml", _replace("memory: 208M", "memory: 50M"),
                      "resources.requests.memory '50M'"),
}  # fmt: skip


@pytest.mark.parametrize("case", BROKEN, ids=list(BROKEN))
def test_each_check_catches_a_broken_field_and_names_it(tmp_path: Path, case: str):
    kind, name, edit, expected = BROKEN[case]
    folder = deploy(tmp_path, runtime="openvino" if kind == "openvino" else "onnxruntime",
                    fixed_batch=1 if kind == "fixed" else None)  # fmt: skip
    write_serving(folder, UNCHECKED)
    serving = folder / "serving"
    path = serving / name
    if edit is None:  # a new file in its place: the version folder's file is a hard link to the deploy folder's
        data = path.read_bytes()
        path.unlink()
        path.write_bytes(data + b"\0")
    else:
        path.write_text(edit(path.read_text()))
    manifest = manifest_record.load(folder)

    problems = {
        "triton": lambda: check_triton(serving / "triton", manifest, read_signature(folder, manifest)),
        "ovms": lambda: check_ovms(serving / "ovms", manifest),
        "kserve": lambda: check_kserve(path, manifest),
        "model_analyzer.yaml": lambda: check_analyzer(serving, manifest),
    }[name.partition("/")[0]]()

    assert any(expected in problem for problem in problems), problems
    assert all(problem.startswith((name.partition("/")[0] + "/", f"{name}: ")) for problem in problems)


def test_a_failed_check_raises_naming_file_and_field_and_keeps_the_last_repository(tmp_path: Path, monkeypatch):
    folder = deploy(tmp_path, fixed_batch=1)
    write_serving(folder, UNCHECKED)
    kept = (folder / "serving" / "triton" / MODEL / "config.pbtxt").read_text()
    monkeypatch.setattr(triton, "batching", lambda manifest, signature, backend: (8, "a wrong rule"))

    with pytest.raises(ModelFileError, match=rf"serving/triton/{MODEL}/config.pbtxt: max_batch_size 8: must be 0"):
        write_serving(folder, UNCHECKED)

    assert (folder / "serving" / "triton" / MODEL / "config.pbtxt").read_text() == kept


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ({"code": "code", "runtime": "torch", "entry": "model.json"}, "a code package (torch, code/)"),
        ({"context": 256, "runtime": "onnxruntime-genai", "entry": "."}, "a text-generation decoder"),
        ({"runtime": "tensorrt"}, "runtime tensorrt: these repositories serve ONNX"),
    ],
    ids=["code", "text generation", "other runtime"],
)
def test_what_no_engine_serves_as_is_gets_one_line_per_engine_and_no_repository(tmp_path: Path, fields, why):
    folder = deploy(tmp_path, **fields)

    report = write_serving(folder, UNCHECKED)

    assert not (folder / "serving" / "triton").exists() and not (folder / "serving" / "ovms").exists()
    readme = (folder / "serving" / "README.md").read_text()
    for engine in ("triton", "ovms", "kserve"):
        assert f"- {engine}: cannot serve {MODEL} as is: {why}" in readme
    assert all(line.startswith(f"{r.engine}: cannot serve it as is: {why}") for r, line in zip(
        report.engines, report.lines(), strict=True))  # fmt: skip


def test_the_signature_comes_from_the_model_file_and_refuses_what_it_cannot_read(tmp_path: Path):
    folder = deploy(tmp_path)
    manifest = manifest_record.load(folder)

    signature = read_signature(folder, manifest)

    assert [(t.name, t.datatype, t.shape) for t in (*signature.inputs, *signature.outputs)] == [
        ("x", "FP32", [-1, 12]),
        ("output", "FP32", [-1, 3]),
    ]
    renamed = manifest.model_copy(update={"inputs": {"features": manifest.inputs["x"]}})
    with pytest.raises(
        ModelFileError, match=r"model.onnx: the manifest's inputs \(features\) are not the model's \(x\)"
    ):
        read_signature(folder, renamed)
    with pytest.raises(ModelFileError, match=r"model.onnx: runtime 'torch' with a .onnx entry"):
        read_signature(folder, manifest.model_copy(update={"runtime": "torch"}))
    (folder / "model.onnx").write_bytes(b"not onnx")
    with pytest.raises(ModelFileError, match=r"model.onnx: onnxruntime cannot load it"):
        read_signature(folder, manifest)
    assert [v2_datatype(np.float32), v2_datatype("int64"), v2_datatype(bool)] == ["FP32", "INT64", "BOOL"]
    assert numpy_dtype("FP16") == np.float16 and triton_type("BYTES") == "TYPE_STRING"


def test_an_output_that_is_no_tensor_matters_only_when_the_manifest_serves_it(tmp_path: Path):
    """An ONNX-ML classifier's ZipMap output (a sequence of maps) has no v2 datatype: left out unless listed."""
    import onnx
    from onnx import TensorProto, helper

    scores = helper.make_sequence_type_proto(
        helper.make_map_type_proto(TensorProto.INT64, helper.make_tensor_type_proto(TensorProto.FLOAT, []))
    )
    graph = helper.make_graph(
        [helper.make_node("ArgMax", ["x"], ["label"], axis=1, keepdims=0),
         helper.make_node("ZipMap", ["x"], ["scores"], domain="ai.onnx.ml", classlabels_int64s=[0, 1, 2])],
        "classifier",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])],
        [helper.make_tensor_value_info("label", TensorProto.INT64, ["batch"]),
         helper.make_value_info("scores", scores)],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 1)])
    model.ir_version = 9
    onnx.save(model, str(tmp_path / "model.onnx"))
    manifest = Manifest(model=MODEL, variant="onnx_fp32", machine="m", runtime="onnxruntime", entry="model.onnx",
                        inputs={"x": {"shape": ["batch", 3]}}, outputs=["label"])  # fmt: skip

    assert [t.name for t in read_signature(tmp_path, manifest).outputs] == ["label"]
    with pytest.raises(
        ModelFileError, match=r"model.onnx: scores is a seq\(map\(int64,tensor\(float\)\)\): not a tensor"
    ):
        read_signature(tmp_path, manifest.model_copy(update={"outputs": ["label", "scores"]}))


def test_the_serving_command_prints_one_line_per_engine(tmp_path: Path, capsys):
    folder = deploy(tmp_path)

    assert main(["serving", str(folder), "--triton", "25.08", "--no-version-check"]) == 0

    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{MODEL}: {folder / 'serving'}"
    assert [line.split(":")[0].strip() for line in out[1:]] == ["triton", "ovms", "kserve"]
    readme = (folder / "serving" / "README.md").read_text()
    assert "Triton 25.08 runs onnxruntime 1.23.0: not checked (serving.check_versions is false)" in readme
