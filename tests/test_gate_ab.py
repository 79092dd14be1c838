"""`gate --remeasure` judges latency on A/B figures measured in one session: it fails a
deliberately slower artifact and passes identical ones."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import onnx
import yaml
from onnx import TensorProto, helper

from pipeline import layout
from pipeline.data import DataSet
from pipeline.files import write_json
from pipeline.gate_ab import Side, paired
from tests.conftest import REPO

FAST_BENCH = {
    "threads": 1,
    "warmup": {"iters": 5, "seconds": 0.05},
    "latency": {"segments": 1, "min_iters": 30, "min_seconds": 0.2, "max_seconds": 1.0},
}


def chain(matmuls: int) -> onnx.ModelProto:
    """x[batch, 64] through `matmuls` MatMuls: the more of them, the slower the same function shape."""
    weight = helper.make_tensor("w", TensorProto.FLOAT, [64, 64], np.eye(64, dtype=np.float32).ravel())
    nodes, previous = [], "x"
    for i in range(matmuls):
        nodes.append(helper.make_node("MatMul", [previous, "w"], [f"h{i}"]))
        previous = f"h{i}"
    nodes.append(helper.make_node("Identity", [previous], ["y"]))
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 64])],
        [weight],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


def project(root: Path, matmuls: int) -> Side:
    """A project root holding one built onnx_fp32 artifact and the scoring rows it is timed on."""
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["models"] = ["m"]
    params["catalog"]["m"] = {"source": "onnx", "file": "model.onnx", "inputs": {"x": {"shape": ["batch", 64]}}}
    params["bench"] = FAST_BENCH
    root.mkdir(parents=True)
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    x = np.random.default_rng(0).standard_normal((8, 64)).astype(np.float32)
    source = layout.source_dir("m", root)
    source.mkdir(parents=True)
    DataSet({"x": x}, {"y": x}).save(source / layout.REFERENCE)
    artifact = layout.variant_dir("m", "onnx_fp32", root)
    artifact.mkdir(parents=True)
    onnx.save(chain(matmuls), artifact / "model.onnx")
    write_json(artifact / layout.BUILD_INFO, {"runtime": "onnxruntime", "entry": "model.onnx", "runtime_config": {}})
    return Side(root, "m", "onnx_fp32")


def test_a_deliberately_slower_artifact_fails_and_identical_ones_pass(tmp_path):
    fast, slow = project(tmp_path / "fast", 2), project(tmp_path / "slow", 400)
    regressed = paired("m", fast, slow, rounds=2)
    assert len(regressed.base_ms) == len(regressed.now_ms) == 2
    assert regressed.change_pct > 100 and "paired p50 regressed" in regressed.failure(10.0)
    copy = tmp_path / "copy"
    shutil.copytree(fast.root, copy)
    same = paired("m", fast, Side(copy, "m", "onnx_fp32"), rounds=3)
    assert same.failure(50.0) is None  # identical artifacts, timed alternately: no regression
