"""Runtime adapters share one interface; unavailable runtimes say why."""

from __future__ import annotations

import numpy as np

from pipeline import runtimes
from pipeline.core import registry
from pipeline.core.registry import Package, Runtime
from pipeline.optimize.applicability import runtime_unavailable


def test_onnxruntime_session(tiny_onnx):
    session = runtimes.load("onnxruntime", tiny_onnx, threads=1)
    assert session.input_names == ["x"] and session.output_names == ["output"]
    x = np.random.default_rng(0).standard_normal((4, 12)).astype(np.float32)
    out = session.run({"x": x})
    assert out["output"].shape == (4, 3)
    np.testing.assert_allclose(session.prepare({"x": x})()[0], out["output"])
    assert session.details()["intra_op_threads"] == 1


def test_missing_package_is_a_skip_reason(monkeypatch):
    monkeypatch.setitem(registry.PACKAGES, "no-such-package", Package(("no_such_package_xyz",)))
    monkeypatch.setitem(registry.RUNTIMES, "imaginary", Runtime("pipeline.runtimes.ort", ("no-such-package",)))
    assert runtime_unavailable("imaginary") == "no_such_package_xyz is not installed"
    assert runtime_unavailable("onnxruntime") is None
    assert runtime_unavailable("imaginary", "cuda:0") == "no_such_package_xyz is not installed"
