"""docs/development.md's "Adding a source kind", followed to the letter in a copy of the project: a
dummy kind, `onnx_copy` (an ONNX file, loaded by the onnx kind's loader under its own name), goes in
with its loader module, its SOURCES entry, its place in the schema and in the user's docs; a model of
the kind exports and its onnx_fp32 variant is measured through `dvc repro`; no other file changes but
the generated code layout.
Slow (about 15 s on 2 cores): a copy of the project, its generators and a `dvc repro` of one model."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import yaml

from tests.pipeline_runs import changed_files, metrics, read, recipe_project, run, stages_run, tracked, written_by_repro

pytestmark = pytest.mark.slow

KIND = "onnx_copy"
LOADER_FILE = f"pipeline/prepare/sources/{KIND}.py"
LOADER_CODE = '''
"""A dummy source kind: an ONNX file, loaded as the onnx kind loads one."""

from __future__ import annotations

from pathlib import Path

from pipeline.core.config import ModelConfig
from pipeline.prepare.sources.onnxfile import OnnxSource


class OnnxCopySource(OnnxSource):
    kind = "onnx_copy"


def load(name: str, config: ModelConfig, root: Path, dims: dict[str, int] | None = None) -> OnnxCopySource:
    return OnnxCopySource(name, config, root, dims)
'''
REGISTRY, SCHEMA, USER_DOCS = "pipeline/core/registry.py", "pipeline/core/config.py", "docs/bring-your-own-model.md"
# Each edit: (file, text found once, its replacement).
EDITS = [
    (REGISTRY, "SOURCES: dict[str, Source] = {\n", "SOURCES: dict[str, Source] = {\n"
     f'    "{KIND}": Source("pipeline.prepare.sources.{KIND}", "onnx_fp32", ("onnx", "onnxruntime")),\n'),
    (SCHEMA, '"transformers"]  # fmt: skip', f'"transformers", "{KIND}"]  # fmt: skip'),  # SourceKind
    (SCHEMA, 'FILE_SOURCES = ("onnx", "savedmodel", "tflite", "sklearn", *TREE_SOURCES)',
     f'FILE_SOURCES = ("onnx", "savedmodel", "tflite", "sklearn", *TREE_SOURCES, "{KIND}")'),  # its `file`
    (USER_DOCS, "`jax`, `onnx`, or", f"`jax`, `onnx`, `{KIND}` (an ONNX file, loaded as `onnx`), or"),
]  # fmt: skip


def test_a_source_kind_added_as_the_docs_say_exports_and_is_measured_end_to_end(tmp_path, monkeypatch):
    root = tmp_path / "project"
    monkeypatch.setenv("PYTHONPATH", str(root))  # the copy's code in the children, not the editable install's
    pipeline = [sys.executable, "-m", "pipeline"]
    params = recipe_project(root, variants=["onnx_fp32"])

    # docs/development.md, "Adding a source kind": 1. the loader, 2. its SOURCES entry, 4. the schema, 6. the user's
    # docs (no runtime of its own, 3, and no inspector, 5); then a model of the kind (the user's), 7. the generators.
    (root / LOADER_FILE).write_text(textwrap.dedent(LOADER_CODE).lstrip())
    for file, old, new in EDITS:
        text = (root / file).read_text()
        assert text.count(old) == 1, (file, old)
        (root / file).write_text(text.replace(old, new))
    params["catalog"]["tiny"]["source"] = KIND
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    run([*pipeline, "stages", "--write"], root)
    run([*pipeline, "docs", "--write"], root)

    assert changed_files(root) == {LOADER_FILE, REGISTRY, SCHEMA, USER_DOCS, "params.yaml", "docs/code-layout.md"}
    assert f"`{LOADER_FILE}`" in (root / "docs" / "code-layout.md").read_text()  # the code layout's new row
    assert "ok" in run([*pipeline, "check"], root)

    before = changed_files(root)
    output = run(["dvc", "repro", "variants/onnx_fp32/dvc.yaml"], root)
    after = changed_files(root)
    assert after - written_by_repro(after) == before, after - before  # repro wrote its outputs alone
    assert {"export@tiny", "build@tiny-onnx_fp32", "bench@tiny-onnx_fp32"} <= stages_run(output)
    exported = read(root / "reports" / "export" / "tiny.json")
    assert exported["status"] == "ok" and exported["source"] == KIND, exported
    measured = tracked(root, "tiny", "onnx_fp32")
    assert measured["status"] == "ok" and measured["p50_ms"] > 0, measured
    assert metrics(root, "tiny", "onnx_fp32")["fidelity"]["output"]["cosine_min"] > 0.9999

    # What a model of the kind must name is the schema's: without its file, `check` says so.
    del params["catalog"]["tiny"]["file"]
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    done = subprocess.run([*pipeline, "check"], cwd=root, capture_output=True, text=True)
    assert done.returncode == 2 and "catalog.tiny.file" in done.stderr, done.stderr
