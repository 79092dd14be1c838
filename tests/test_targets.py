"""The target model on a CPU-only host: names, probes, skip records, provider lists, TensorRT
profile shapes and engine-cache keys. GPU runs are in tests/test_gpu.py (marked `gpu`)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from pipeline import runtimes
from pipeline.core import layout
from pipeline.core import registry as variants
from pipeline.core.config import Constraints, InputSpec, Params, SelectConfig, validate
from pipeline.core.errors import ConfigError
from pipeline.core.files import write_json
from pipeline.core.records.env import Probe
from pipeline.core.targets import Target, target_for
from pipeline.decide.selection import screen
from pipeline.machine import probe as target_probe
from pipeline.machine.probe import engine_cache_key, probe
from pipeline.measure.stage import benchmark_variant
from pipeline.optimize import applicability
from pipeline.optimize.passes.tensorrt import ort_profile_options, profile_shapes
from pipeline.optimize.stage import build_variant
from pipeline.runtimes import ort
from tests.conftest import REPO, tiny_config
from tests.helpers import metric

GPU_VARIANTS = [name for name, v in variants.VARIANTS.items() if v.device == "cuda"]
NO_GPU = not probe("cuda:0")["available"]


def test_target_names_parse_and_bad_ones_name_the_field():
    assert [str(Target.parse(n)) for n in ("cpu", "cuda", "cuda:1")] == ["cpu", "cuda:0", "cuda:1"]
    for bad in ("tpu", "cpu:0", "cuda:x", "gpu"):
        with pytest.raises(ValueError, match="unknown target"):
            Target.parse(bad)
    params = yaml.safe_load((REPO / "params.yaml").read_text()) | {"targets": ["cpu", "tpu"]}
    with pytest.raises(ConfigError, match=r"params.yaml: targets.1: unknown target 'tpu'"):
        validate(Params, params, "params.yaml")


def test_a_variant_runs_on_the_first_target_of_its_kind():
    assert target_for("cuda", ["cpu", "cuda:1", "cuda:0"]) == "cuda:1"
    assert target_for("cuda", ["cpu"]) is None
    assert target_for("cpu", ["cuda", "cpu"]) == "cpu"


@pytest.mark.skipif(not NO_GPU, reason="this host has an NVIDIA driver")
def test_the_probe_says_what_is_missing_on_a_host_without_a_gpu():
    assert probe("cpu") == {"available": True, "reason": ""}
    found = probe("cuda:0")
    assert found["available"] is False and "no NVIDIA driver" in found["reason"]
    child = target_probe.probe_cuda(0)  # the child's own checks, in this process
    assert child["available"] is False and "libcuda.so.1 cannot be loaded" in child["reason"]


def test_gpu_runtimes_without_their_packages_say_what_to_install(monkeypatch):
    monkeypatch.setattr(applicability, "_missing", lambda package: package in ("tensorrt", "cuda.bindings"))
    assert applicability.runtime_unavailable("tensorrt", "cuda:0") == (
        "tensorrt, cuda.bindings is not installed (pip install -e '.[gpu]')"
    )
    assert "runs on cpu, not cuda" in applicability.runtime_unavailable("openvino", "cuda:0")
    monkeypatch.setattr(applicability, "_missing", lambda package: False)
    assert applicability.runtime_unavailable("tensorrt", "cpu") == "the tensorrt adapter runs on cuda, not cpu"


def test_cpu_onnxruntime_has_no_cuda_provider_and_says_so():
    assert "no CUDA execution provider: install onnxruntime-gpu" in ort.unavailable_on("cuda:0")


def test_a_session_that_falls_back_to_the_cpu_is_an_error(tiny_onnx):
    with pytest.raises(RuntimeError, match="asked ONNX Runtime for CUDAExecutionProvider, the session runs on CPU"):
        runtimes.load("onnxruntime", tiny_onnx, 1, {"provider": "cuda"}, "cuda:0")


def test_provider_lists_follow_target_and_build(tmp_path, monkeypatch):
    assert ort.providers(tmp_path / "m.onnx", "cpu", ort.Config()) == ["CPUExecutionProvider"]
    assert ort.providers(tmp_path / "m.onnx", "cuda:1", ort.Config(provider="cuda")) == [
        ("CUDAExecutionProvider", {"device_id": 1}),
        "CPUExecutionProvider",
    ]
    model = tmp_path / "model.onnx"
    model.write_bytes(b"onnx bytes")
    gpu = {"available": True, "gpu": "NVIDIA H100", "compute_capability": "9.0"}
    monkeypatch.setattr(target_probe, "probe_cuda", lambda index: gpu)
    monkeypatch.setattr(target_probe, "external_weights", lambda path: [])
    chain = ort.providers(model, "cuda:0", ort.Config(provider="tensorrt", fp16=True, trt_profile_min_shapes="x:1x12"))
    name, options = chain[0]
    assert name == "TensorrtExecutionProvider" and [p[0] for p in chain[1:2]] == ["CUDAExecutionProvider"]
    assert options["trt_fp16_enable"] and not options["trt_int8_enable"]
    assert options["trt_profile_min_shapes"] == "x:1x12" and options["device_id"] == 0
    key = engine_cache_key(model, ort.tensorrt_version(), Probe.model_validate(gpu))
    assert options["trt_engine_cache_path"] == str(tmp_path / "trt_cache" / key)


def test_engine_cache_key_names_model_tensorrt_and_gpu(tmp_path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array(np.ones((4, 4), np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        [weight],
    )
    model = tmp_path / "model.onnx"
    onnx.save_model(helper.make_model(graph), str(model), save_as_external_data=True, location="model.onnx.data",
                    size_threshold=0)  # fmt: skip
    h100 = Probe(available=True, gpu="NVIDIA H100", compute_capability="9.0")
    key = engine_cache_key(model, "11.4", h100)
    assert key == engine_cache_key(model, "11.4", h100.model_copy())
    assert key != engine_cache_key(model, "11.5", h100)
    assert key != engine_cache_key(
        model, "11.4", h100.model_copy(update={"gpu": "NVIDIA A100", "compute_capability": "8.0"})
    )
    data = tmp_path / "model.onnx.data"
    data.write_bytes(np.full((4, 4), 2, np.float32).tobytes())  # other weights, same graph file
    assert key != engine_cache_key(model, "11.4", h100)


def test_profile_shapes_come_from_the_input_spec():
    ids = InputSpec(shape=["batch", "seq"], dtype="int64", kind="token_ids", high=100)
    tokens = {"input_ids": ids, "attention_mask": ids}
    shapes = profile_shapes(tokens, {"seq": 64}, {"seq": [16, 64, 128]}, max_batch=32, fixed_batch=None)
    assert shapes["input_ids"] == ((1, 16), (1, 64), (32, 128))
    assert shapes["attention_mask"] == shapes["input_ids"]
    fixed = profile_shapes({"image": InputSpec(shape=[4, 3, 224, 224])}, {}, {}, max_batch=128, fixed_batch=4)
    assert fixed["image"] == ((4, 3, 224, 224),) * 3
    options = ort_profile_options({"a": ((1, 2), (1, 4), (8, 4)), "b": ((1,), (1,), (8,))})
    assert options == {
        "trt_profile_min_shapes": "a:1x2,b:1",
        "trt_profile_opt_shapes": "a:1x4,b:1",
        "trt_profile_max_shapes": "a:8x4,b:8",
    }


def gpu_params(targets: list[str]) -> Params:
    return Params.model_validate(
        {
            "models": ["tiny"],
            "targets": targets,
            "catalog": {"tiny": tiny_config().model_dump()},
            "variants": {"onnx_fp32": {}},
            "gpu_variants": {name: {} for name in GPU_VARIANTS},
        }
    )


def test_every_gpu_variant_is_skipped_with_the_probe_reason(stage_project, machine):
    reason = "no NVIDIA driver (no /proc/driver/nvidia, no libcuda)"
    probes = {"cpu": {"available": True}, "cuda:0": {"available": False, "reason": reason}}
    env = layout.env_file(stage_project)
    write_json(env, json.loads(env.read_text()) | {"targets": probes})
    params = gpu_params(["cpu", "cuda:0"])
    assert len(GPU_VARIANTS) == 7
    for name in GPU_VARIANTS:
        info = build_variant("tiny", name, params, stage_project)
        assert info.status == "skipped", name
        assert info.reason == f"target cuda:0 is not usable here: {reason}"
        assert info.target == "cuda:0"
        record = benchmark_variant("tiny", name, params, stage_project)
        assert record.kind == "skipped-unavailable" and record.device == "cuda:0" and record.latency_ms is None
    saved = json.loads(layout.details_file("tiny", "tensorrt_int8", stage_project).read_text())
    assert saved["reason"].endswith(reason)


def test_gpu_variants_without_a_cuda_target_are_a_params_error():
    with pytest.raises(ValueError, match="GPU variants need a cuda target"):
        gpu_params(["cpu"])


def test_devices_constraint_takes_a_kind_or_a_target():
    gpu = metric(1.0, device="cuda:0")
    metrics = {"on_cpu": metric(2.0), "on_gpu": gpu}
    assert screen(metrics, SelectConfig(), Constraints(devices=["cuda"])).chosen == "on_gpu"
    assert screen(metrics, SelectConfig(), Constraints(devices=["cuda:0"])).chosen == "on_gpu"
    choice = screen(metrics, SelectConfig(), Constraints(devices=["cpu"]))
    assert choice.chosen == "on_cpu" and "device cuda:0 not allowed" in choice.rejected["on_gpu"]


def test_the_env_stage_records_each_configured_targets_probe(tmp_path, machine):
    from pipeline.machine.naming import write_env

    result = write_env(gpu_params(["cpu", "cuda:0"]), tmp_path)
    env = json.loads(layout.env_file(tmp_path).read_text())
    assert env["machine"]["name"] == machine and env["machine"]["source"] == "MODELOPT_MACHINE"
    recorded = env["targets"]
    assert recorded["cpu"] == {"available": True, "reason": ""}
    assert recorded["cuda:0"] == probe("cuda:0")
    assert result["status"] == "ok" and "cpu" in result["reason"]
