"""docs/development.md's "Adding a backend", followed to the letter in a copy of the project: a dummy
backend (a pass that copies the ONNX export, a runtime that is ONNX Runtime's adapter under another
name) goes in with one pass module, one runtime module and its registry entries, the user lists it in
params.yaml, the generators write its stage file and the docs table, and `dvc repro` builds and
measures it; no other file changes."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.conftest import REPO, copy_project, write_params
from tests.helpers import FAST_BENCH
from tests.pipeline_runs import read, run, stages_run

pytestmark = pytest.mark.slow

PASS_FILE = "pipeline/optimize/passes/dummy_copy.py"
PASS_CODE = '''
"""A dummy backend's pass: the ONNX export, copied."""

from __future__ import annotations

import shutil

from pipeline.optimize.passes.base import BuildContext, BuildResult, NoConfig, Pass


class CopyConfig(NoConfig):
    label: str = "copied"


class CopyExport(Pass):
    Config = CopyConfig

    def run(self, ctx: BuildContext, config: CopyConfig) -> BuildResult:
        shutil.copy(ctx.exported_onnx, ctx.out_dir / "model.onnx")
        return BuildResult("model.onnx", {"label": config.label})
'''
RUNTIME_FILE = "pipeline/runtimes/dummy_rt.py"
RUNTIME_CODE = '''
"""A dummy backend's runtime: ONNX Runtime's adapter under another name."""

from pipeline.runtimes.ort import load, unavailable_on

__all__ = ["load", "unavailable_on"]
'''
# The registry entries, each after its table's opening line.
ENTRIES = {
    "RUNTIMES: dict[str, Runtime] = {\n": '    "dummy": Runtime("pipeline.runtimes.dummy_rt", ("onnxruntime",)),\n',
    "VARIANTS: dict[str, Variant] = {v.name: v for v in [\n": (
        '    Variant("dummy_copy", "the ONNX export, copied by a dummy pass", "dummy", "fp32",\n'
        '            "pipeline.optimize.passes.dummy_copy:CopyExport", requires=("onnx",)),\n'
    ),
}
REGISTRY = "pipeline/core/registry.py"
VARIANT = "dummy_copy"


def write_tiny_onnx(path: Path) -> None:
    """x [batch, 12] -> MatMul -> Add -> output [batch, 3], written without an exporter."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weights = [
        numpy_helper.from_array(rng.standard_normal((12, 3)).astype(np.float32), "w"),
        numpy_helper.from_array(rng.standard_normal(3).astype(np.float32), "b"),
    ]
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["output"])],
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 12])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 3])],
        weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))


def git(root: Path, *args: str) -> str:
    return run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], root)


def test_a_backend_added_as_the_docs_say_builds_and_is_measured_end_to_end(tmp_path, monkeypatch):
    root = copy_project(tmp_path / "project")
    # The copy's own code, in the children too: the editable install points at the repository.
    monkeypatch.setenv("PYTHONPATH", str(root))
    pipeline = [sys.executable, "-m", "pipeline"]

    # The user's project before the backend: one small ONNX model, quick benchmarks, generated files current.
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["models"] = ["tiny"]
    params["catalog"]["tiny"] = {"source": "onnx", "file": "model.onnx", "inputs": {"x": {"shape": ["batch", 12]}}}
    params["bench"] = FAST_BENCH
    write_params(root, params)
    write_tiny_onnx(root / "models" / "tiny" / "model.onnx")
    run([*pipeline, "docs", "--write"], root)
    run(["git", "init", "-q"], root)
    run(["dvc", "init", "-q"], root)
    shutil.copytree(REPO / ".dvc" / "plots", root / ".dvc" / "plots")  # as tests/test_e2e.py's project
    shutil.copy(REPO / ".dvc" / "config", root / ".dvc" / "config")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "the project")

    # docs/development.md, "Adding a backend": 1. the pass, 2. the runtime, 3. the registry entries
    # (no new package: 4. leaves pyproject.toml as it is), then the user lists it, 5. the generators.
    (root / PASS_FILE).write_text(textwrap.dedent(PASS_CODE).lstrip())
    (root / RUNTIME_FILE).write_text(textwrap.dedent(RUNTIME_CODE).lstrip())
    registry = (root / REGISTRY).read_text()
    for table, entry in ENTRIES.items():
        assert registry.count(table) == 1, table
        registry = registry.replace(table, table + entry)
    (root / REGISTRY).write_text(registry)
    params["variants"][VARIANT] = {"label": "by the dummy pass"}
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    run([*pipeline, "stages", "--write"], root)
    run([*pipeline, "docs", "--write"], root)

    changed = {line[3:] for line in git(root, "status", "--porcelain", "--untracked-files=all").splitlines()}
    assert changed == {
        PASS_FILE,
        RUNTIME_FILE,
        REGISTRY,
        "params.yaml",
        f"variants/{VARIANT}/dvc.yaml",
        "docs/variants.md",
        "docs/development.md",
    }  # fmt: skip (the code layout names the modules)
    assert f"`{VARIANT}`" in (root / "docs" / "variants.md").read_text()
    assert "ok" in run([*pipeline, "check"], root)

    output = run(["dvc", "repro", f"variants/{VARIANT}/dvc.yaml"], root)
    assert {f"build@tiny-{VARIANT}", f"bench@tiny-{VARIANT}"} <= stages_run(output)
    metrics = read(root / "reports" / "metrics" / "tiny" / f"{VARIANT}.json")
    assert metrics["status"] == "ok" and metrics["p50_ms"] > 0 and metrics["size_mb"] > 0, metrics
    details = read(root / "reports" / "details" / "tiny" / f"{VARIANT}.json")
    assert details["runtime"] == "dummy" and details["build"]["label"] == "by the dummy pass"
    assert details["build"]["load_check"].startswith("ok: loaded by dummy")
    assert details["fidelity"]["output"]["cosine_min"] > 0.9999

    # Its knobs are its pass's: a misspelt one is named before anything is built.
    params["variants"][VARIANT] = {"lable": "x"}
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    done = subprocess.run([*pipeline, "check"], cwd=root, capture_output=True, text=True)
    assert done.returncode == 2 and f"params.yaml: variants.{VARIANT}.lable: unknown key" in done.stderr
