"""GPU paths, run wherever an NVIDIA GPU and the `[gpu]` extra are present (marked `gpu`; skipped
with the probe's reason elsewhere, which includes CI and this project's CPU machines)."""

from __future__ import annotations

import dataclasses
import shutil

import numpy as np
import pytest

from pipeline import runtimes
from pipeline.core import layout
from pipeline.core import registry as variants
from pipeline.core.files import read_json, write_json
from pipeline.machine.probe import probe
from pipeline.optimize.applicability import runtime_unavailable
from pipeline.optimize.knobs import pass_class
from tests.conftest import REPO, build, tiny_config, torch_build_context

CUDA = probe("cuda:0")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not CUDA["available"], reason=CUDA["reason"])]


def on_gpu(context):
    """The tiny model's build context, for cuda:0, with the input spec TensorRT profiles need and
    a params.yaml (the profile's largest batch comes from its throughput sweep)."""
    shutil.copy(REPO / "params.yaml", context.root / "params.yaml")
    info = read_json(context.source_dir / layout.SOURCE_INFO)
    write_json(context.source_dir / layout.SOURCE_INFO, info | {"inputs": {"x": {"shape": ["batch", 12]}}, "dims": {}})
    return dataclasses.replace(context, target="cuda:0")


@pytest.mark.parametrize(
    "name", ["onnx_cuda_fp32", "onnx_cuda_fp16", "onnx_trt_fp16", "onnx_trt_int8", "tensorrt_fp16", "tensorrt_int8"]
)
def test_gpu_variant_builds_runs_on_its_provider_and_stays_close(context, name):
    spec = variants.get(name)
    reason = runtime_unavailable(spec.runtime, "cuda:0")
    if reason:
        pytest.skip(reason)
    ctx = on_gpu(context)
    result = pass_class(spec)().run(ctx, pass_class(spec).Config())
    result.runtime_config |= dict(spec.runtime_options)
    session = runtimes.load(spec.runtime, ctx.out_dir / result.entry, 1, result.runtime_config, "cuda:0")
    reference = ctx.reference()
    batch = {k: v[:8] for k, v in reference.inputs.items()}
    out = session.run(batch)["output"]
    tolerance = 0.5 if spec.precision == "int8" else 0.05
    np.testing.assert_allclose(out, reference.outputs["output"][:8], atol=tolerance, rtol=0.05)
    if spec.runtime == "onnxruntime":
        from pipeline.runtimes.ort import PROVIDERS

        assert session.details()["provider"] == PROVIDERS[dict(spec.runtime_options)["provider"]]


def test_torch_compile_cuda_builds_an_aotinductor_package_that_runs_on_the_gpu(tiny_project):
    from pipeline.prepare.sources import load_source

    reason = runtime_unavailable("torch", "cuda:0")
    if reason:
        pytest.skip(reason)
    ctx = dataclasses.replace(torch_build_context(tiny_project), target="cuda:0")
    result = build(ctx, "torch_compile_cuda")
    assert "for cuda:0" in result.details["compiler"]
    x = {"x": np.random.default_rng(0).standard_normal((6, 12)).astype(np.float32)}
    compiled = runtimes.load("torch", ctx.out_dir / result.entry, 1, result.runtime_config, "cuda:0").run(x)
    eager = load_source("tiny", tiny_config(), tiny_project).predict(x)["output"]
    np.testing.assert_allclose(compiled["output"], eager, atol=1e-4, rtol=1e-4)


def gpu_calls(context):
    """A call that keeps cuda:0 busy: ONNX Runtime's CUDA provider where installed, else torch's CUDA."""
    if not runtime_unavailable("onnxruntime", "cuda:0"):
        session = runtimes.load("onnxruntime", context.exported_onnx, 1, {"provider": "cuda"}, "cuda:0")
        return session.prepare({"x": np.zeros((64, 12), np.float32)})
    if runtime_unavailable("torch", "cuda:0"):
        pytest.skip("neither onnxruntime-gpu nor a CUDA build of torch is installed")
    import torch

    a = torch.randn(1024, 1024, device="cuda:0")
    return lambda: (a @ a).sum().item()


def test_gpu_meter_reads_energy_memory_and_utilisation(context):
    from pipeline.measure.gpu import GpuMeter

    call = gpu_calls(context)
    meter = GpuMeter("cuda:0")
    meter.start()
    for _ in range(2000):
        call()
    energy = meter.stop(2000)
    assert energy["joules"] >= 0 and energy["calls"] == 2000
    assert meter.figures()["gpu_memory_mb"] > 0
