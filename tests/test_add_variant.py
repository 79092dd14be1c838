"""docs/development.md's "Adding a variant", followed to the letter in a copy of the project: a new
ONNX Runtime variant that reuses onnx_opt's pass with other knobs (ORT's basic level, no onnxslim)
goes in with its registry entry and its params.yaml section, the generators write its stage file and
its row of the variants table, and `dvc repro` builds and measures it; no other file changes.
Slow (about 15 s on 2 cores): a copy of the project, its generators and a `dvc repro` of one model."""

from __future__ import annotations

import sys

import pytest
import yaml

from tests.pipeline_runs import changed_files, metrics, recipe_project, run, stages_run, tracked, written_by_repro

pytestmark = pytest.mark.slow

VARIANT = "onnx_opt_basic"
REGISTRY = "pipeline/core/registry.py"
TABLE = "VARIANTS: dict[str, Variant] = {v.name: v for v in [\n"
ENTRY = (
    '    Variant("onnx_opt_basic", "onnx_opt at ORT\'s basic level, without onnxslim", "onnxruntime", "fp32",\n'
    '            "pipeline.optimize.passes.onnxruntime.optimize:OrtOptimize", requires=(*ONNX, "onnxslim")),\n'
)


def test_a_variant_added_as_the_docs_say_builds_and_is_measured_end_to_end(tmp_path, monkeypatch):
    root = tmp_path / "project"
    monkeypatch.setenv("PYTHONPATH", str(root))  # the copy's code in the children, not the editable install's
    pipeline = [sys.executable, "-m", "pipeline"]
    params = recipe_project(root, variants=["onnx_fp32"])

    # docs/development.md, "Adding a variant": 1. the pass (onnx_opt's, reused: no file), 2. its VARIANTS
    # entry, 3. its params.yaml section holding the knobs that make it another variant, 4. the generators.
    registry = (root / REGISTRY).read_text()
    assert registry.count(TABLE) == 1
    (root / REGISTRY).write_text(registry.replace(TABLE, TABLE + ENTRY))
    params["variants"][VARIANT] = {"level": "basic", "slim": False}
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    run([*pipeline, "stages", "--write"], root)
    run([*pipeline, "docs", "--write"], root)

    assert changed_files(root) == {REGISTRY, "params.yaml", f"variants/{VARIANT}/dvc.yaml", "docs/variants.md"}
    assert f"`{VARIANT}`" in (root / "docs" / "variants.md").read_text()
    assert "ok" in run([*pipeline, "check"], root)

    before = changed_files(root)
    output = run(["dvc", "repro", f"variants/{VARIANT}/dvc.yaml"], root)
    after = changed_files(root)
    assert after - written_by_repro(after) == before, after - before  # repro wrote its outputs alone
    assert {f"build@tiny-{VARIANT}", f"bench@tiny-{VARIANT}"} <= stages_run(output)
    measured = tracked(root, "tiny", VARIANT)
    assert measured["status"] == "ok" and measured["p50_ms"] > 0 and measured["size_mb"] > 0, measured
    details = metrics(root, "tiny", VARIANT)
    assert details["runtime"] == "onnxruntime" and details["build"]["level"] == "basic"
    assert "slim" not in details["build"]  # its own knobs, not onnx_opt's
    assert details["fidelity"]["output"]["cosine_min"] > 0.9999
