"""Where the time goes: each runtime's own profiler, aggregated by operator type."""

from __future__ import annotations

import pytest

from pipeline import runtimes
from pipeline.core import layout
from pipeline.core.data import DataSet
from pipeline.measure.profile import op_profile
from tests.conftest import build
from tests.test_bench_worker import StandIn


def one_row(ctx) -> dict:
    data = DataSet.load(ctx.source_dir / layout.REFERENCE)
    return {k: v[:1] for k, v in data.inputs.items()}


def profiled(ctx, variant: str, runtime: str) -> dict:
    result = build(ctx, variant)
    session = runtimes.load(runtime, ctx.out_dir / result.entry, 1, result.runtime_config)
    return op_profile(session, one_row(ctx), calls=5)


def check_shape(profile: dict, every_call: bool = True) -> None:
    assert profile["calls"] == 5 and profile["profiled_ms_per_call"] > 0
    shares = [op["share_pct"] for op in profile["top"].values()]
    assert sum(shares) == pytest.approx(100, abs=0.01) or sum(shares) < 100  # top 10 of all
    assert shares == sorted(shares, reverse=True)
    if every_call:  # every run executes each op
        assert all(op["executions"] % 5 == 0 for op in profile["top"].values())


def test_onnx_runtime_profile_names_the_graphs_operators(context):
    profile = profiled(context, "onnx_fp32", "onnxruntime")
    check_shape(profile)
    assert profile["top"].keys() & {"Gemm", "MatMul", "FusedGemm", "FusedMatMul"}


def test_openvino_profile_names_the_kernel_that_ran(context):
    profile = profiled(context, "openvino_int8", "openvino")
    # OpenVINO's CPU plugin reports a layer that ran in under a microsecond as NOT_RUN on some calls (an
    # input FakeQuantize: executed on 3 of 5 calls, then on none): counted only where it says EXECUTED
    check_shape(profile, every_call=False)
    assert any(op.get("kernel") for op in profile["top"].values())


def test_torch_profile_reports_aten_operators(tiny_project):
    from tests.conftest import torch_build_context

    ctx = torch_build_context(tiny_project)
    result = build(ctx, "torch_eager")
    session = runtimes.load("torch", ctx.out_dir / result.entry, 1, result.runtime_config)
    profile = op_profile(session, one_row(ctx), calls=5)
    assert any(op.startswith("aten::") for op in profile["top"])


def test_a_runtime_without_a_profiler_says_so():
    profile = op_profile(StandIn(), {"x": None}, calls=1)
    assert profile == {"reason": "no operator profiler is wired in for StandIn"}
