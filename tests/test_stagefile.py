"""dvc.yaml is generated from each stage's import walk (pipeline.stagefile): the committed files are
current, every code dep is code the stage runs, and an edit reaches only the stages that run it."""

from __future__ import annotations

from pathlib import Path

import yaml

from pipeline.build.plan import variant_code
from pipeline.core import registry
from pipeline.core.imports import walk
from pipeline.present.docs import check_or_write as docs_check
from pipeline.stagefile import ALWAYS_FILE, ROOT_FILE, check_or_write, render

REPO = Path(__file__).parents[1]


def code_deps() -> dict[str, set[str]]:
    """{stage group: its deps under pipeline/} from the rendered files."""
    found = {}
    for text in render(REPO).values():
        for name, stage in yaml.safe_load(text)["stages"].items():
            body = stage.get("do", stage)
            found[name] = {d for d in body["deps"] if d.startswith("pipeline/")}
    return found


def test_committed_stage_files_are_current():
    assert check_or_write(REPO) == 0, "run `python -m pipeline stages --write`"
    assert (REPO / ROOT_FILE).is_file() and (REPO / ALWAYS_FILE).is_file()


def test_generated_doc_tables_are_current():
    assert docs_check(REPO) == 0, "run `python -m pipeline docs --write`"


def test_every_code_dep_is_code_the_stage_runs():
    deps = code_deps()

    def ours(roots: list[str]) -> set[str]:
        return {p.as_posix() for p in walk(roots, REPO) if p.parts[0] == "pipeline"}

    bench = ours(["stages/bench.py", "pipeline.measure.worker"])
    assert deps["bench"] == bench and "pipeline/measure/worker.py" in bench
    assert deps["report"] == ours(["stages/report.py"])
    assert not any(path.startswith("pipeline/present/") for path in deps["train"] | deps["export"] | deps["build"])


def test_report_code_reaches_only_the_report_stage():
    holders = {name for name, paths in code_deps().items() if "pipeline/present/report.py" in paths}
    assert holders == {"report"}


def test_a_pass_reaches_only_its_variants():
    """No build or bench stage lists a pass (only their shared base): each variant's plan file carries
    its own pass's hash."""
    shared = {"pipeline/build/passes/__init__.py", "pipeline/build/passes/base.py"}
    listed = {p for name, paths in code_deps().items() if name != "plan" for p in paths}
    assert not {p for p in listed if p.startswith("pipeline/build/passes/")} - shared
    fp16 = Path("pipeline/build/passes/fp16.py")
    users = {v for v in registry.VARIANTS if fp16 in variant_code(v, REPO)}
    assert {"onnx_fp16", "onnx_cuda_fp16"} <= users
    assert not users & {"onnx_fp32", "onnx_int8_static", "openvino_int8", "torch_eager"}
    assert fp16.as_posix() in code_deps()["plan"]
