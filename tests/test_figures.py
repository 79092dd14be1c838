"""Figures that used to mislead: each test fails on the old behaviour (issue 19, part 4)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnxconverter_common import float16

from pipeline.ci import remeasure
from pipeline.core.records.build import BuildFacts
from pipeline.machine import fingerprint
from pipeline.measure.clock import CpuClock
from pipeline.measure.stage import honest_precision
from pipeline.optimize.plan import variant_code
from pipeline.runtimes import ort


def _matmul(path: Path) -> Path:
    weight = numpy_helper.from_array(np.random.default_rng(0).standard_normal((16, 16)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 16])],
        [weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    onnx.save(model, path)
    return path


def test_onnx_fp16_on_the_cpu_provider_is_labelled_as_fp32_compute(tmp_path):
    """Old behaviour: `precision: fp16` although ORT's CPU provider ran FP32 kernels behind Casts."""
    fp32 = _matmul(tmp_path / "fp32.onnx")
    fp16 = tmp_path / "fp16.onnx"
    onnx.save(float16.convert_float_to_float16(onnx.load(fp32), keep_io_types=True), fp16)
    executed = ort.load(fp16, 1, {}).details()["inference_precision"]
    assert executed.startswith("fp32 (fp16 storage, fp32 compute")
    assert "inference_precision" not in ort.load(fp32, 1, {}).details()
    label = honest_precision("fp16", executed)
    assert label["precision"] == "fp32" and label["precision_declared"] == "fp16"
    assert label["precision_note"].startswith("fp16 storage, fp32 compute")


def test_other_processes_cpu_is_counted_inside_the_timed_intervals_only(monkeypatch):
    """Old behaviour: the system's CPU time was taken from the first interval's start to the last
    one's end, so whatever ran between them (here a busy core for 1 s) counted as 'other processes'.
    The clocks are simulated: this tests the accounting, not how busy this machine is right now."""
    from collections import namedtuple

    from pipeline.measure import clock as worker

    Times = namedtuple("Times", "user system idle")
    clock_now = {"wall": 0.0, "others_busy": 0.0}
    fake = SimpleNamespace(
        cpu_times=lambda: Times(clock_now["others_busy"], 0.0, 0.0),
        Process=lambda: SimpleNamespace(cpu_times=lambda: Times(0.0, 0.0, 0.0)),
    )
    monkeypatch.setattr(worker, "psutil", fake)
    monkeypatch.setattr(worker.time, "perf_counter", lambda: clock_now["wall"])

    def elapse(seconds: float, others_busy: float) -> None:
        clock_now["wall"] += seconds
        clock_now["others_busy"] += others_busy

    clock, spanning = CpuClock(), CpuClock()
    with spanning.running():  # the old way
        with clock.running():
            elapse(0.2, 0.0)
        elapse(1.0, 1.0)  # another process keeps a core busy between the timed intervals
        with clock.running():
            elapse(0.2, 0.0)
    assert clock.other_load()["other_cpu_pct"] == 0.0
    assert spanning.other_load()["other_cpu_pct"] == pytest.approx(100 / 1.4)


def test_bench_stages_rerun_when_source_adapters_change():
    """Bench stages depend on reports/plan/<variant>.json, which hashes the pass, the runtime adapter
    and what they import: the torch source adapter and the model-code loader included."""
    files = {p.as_posix() for p in variant_code("torch_eager")}
    assert {"pipeline/prepare/sources/pytorch.py", "pipeline/runtimes/torch_module.py"} <= files


def test_fingerprint_records_the_gpu_stack_and_which_onnxruntime(monkeypatch):
    """Old behaviour: onnxruntime-gpu read as onnxruntime 'not installed'; TensorRT, cuda-python and
    nvidia-ml-py were not recorded, so upgrading them left env.json (a bench dependency) unchanged."""
    installed = {"onnxruntime-gpu": "1.31.1", "tensorrt": "10.14.1", "nvidia-ml-py": "13.580.0"}
    monkeypatch.setattr(fingerprint, "_version", lambda name: installed.get(name, "not installed"))
    packages = fingerprint.fingerprint().packages
    assert packages["onnxruntime"] == "1.31.1 (onnxruntime-gpu)"
    assert packages["tensorrt-cu13"] == "10.14.1 (tensorrt)" and packages["nvidia-ml-py"] == "13.580.0"
    assert packages["cuda-python"] == "not installed"


def test_gate_remeasure_runs_with_the_bench_thread_environment(monkeypatch):
    """Old behaviour: the A/B processes ran without OMP_NUM_THREADS & co, unlike the bench stage."""
    seen = {}
    monkeypatch.setattr(remeasure, "artifact_of", lambda root, model, variant: (Path("a"), "stage"))
    monkeypatch.setattr(remeasure, "call", lambda target, kwargs, timeout, env=None: seen.setdefault("env", env))
    remeasure.latency_in_fresh_process(Path("."), "spam_fnn", "onnx_fp32")
    assert seen["env"] and seen["env"]["OMP_NUM_THREADS"].isdigit()


def test_an_int8_variant_whose_runtime_kept_float_activations_says_so():
    build = BuildFacts(
        activations_quantized_at_run_time=False, activations_check="outputs do not differ from group size 0's"
    )
    label = honest_precision("int8", "bf16", build)
    assert label["precision"] == "int8+bf16"
    assert label["precision_note"].startswith("INT8 weights, float matrix products: outputs do not differ")
    assert honest_precision("int8", None, BuildFacts(activations_quantized_at_run_time=True)) == {}
