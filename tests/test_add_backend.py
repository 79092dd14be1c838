"""docs/development.md's "Adding a backend", followed to the letter in a copy of the project: a dummy
backend (a pass that copies the ONNX export, a runtime that is ONNX Runtime's adapter under another
name) goes in with one pass module, one runtime module and its registry entries, the user lists it in
params.yaml, the generators write its stage file and the docs table, and `dvc repro` builds and
measures it; no other file changes but the generated tables (the variants and the code layout).
Slow (about 30 s on 2 cores): a copy of the project, its generators and a `dvc repro` of one model."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import yaml

from tests.pipeline_runs import changed_files, read, recipe_project, run, stages_run

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

from pipeline.runtimes.ort import Config, Details, load, unavailable_on

__all__ = ["Config", "Details", "load", "unavailable_on"]
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


def test_a_backend_added_as_the_docs_say_builds_and_is_measured_end_to_end(tmp_path, monkeypatch):
    root = tmp_path / "project"
    # The copy's own code, in the children too: the editable install points at the repository.
    monkeypatch.setenv("PYTHONPATH", str(root))
    pipeline = [sys.executable, "-m", "pipeline"]
    params = recipe_project(root)  # one small ONNX model, quick benchmarks, generated files current

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

    assert changed_files(root) == {PASS_FILE, RUNTIME_FILE, REGISTRY, "params.yaml", f"variants/{VARIANT}/dvc.yaml",
                                   "docs/variants.md", "docs/code-layout.md"}  # fmt: skip
    assert f"`{VARIANT}`" in (root / "docs" / "variants.md").read_text()
    assert f"`{PASS_FILE}`" in (root / "docs" / "code-layout.md").read_text()  # the code layout's new row
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
