"""Stage dependencies are exact: an edit to the registry reaches the stages that read what it changed
and no others (pipeline.optimize.plan: reports/plan/stage_<group>.json and <variant>.json).

Compared through the plan's hashes, the content of those files: `dvc status` would say the same
(the stages depend on these files and on their data, not on code files) but needs every stage run
once first, a full `dvc repro` of the zoo."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.core import registry
from pipeline.optimize.plan import REGISTRY, STAGE_CODE, stage_code, stage_hash, variant_hash
from tests.conftest import copy_project

REPO = Path(__file__).parents[1]


def plan_hashes(root: Path) -> dict[str, object]:
    """What the plan stage writes about code, by file name: stage_<group> and each variant's."""
    stages = {f"stage_{group}": stage_hash(group, root) for group in STAGE_CODE}
    return stages | {name: variant_hash(name, root) for name in registry.VARIANTS}


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    return copy_project(tmp_path_factory.mktemp("deps") / "project")


@pytest.fixture(scope="module")
def before(project) -> dict[str, object]:
    """The copy's hashes as committed (each test puts its edit back)."""
    return plan_hashes(project)


def edited(root: Path, old: str, new: str) -> dict[str, object]:
    """The plan's hashes with `old` replaced by `new` in the copy's registry (then put back)."""
    path = root / REGISTRY
    text = path.read_text()
    assert text.count(old) == 1, old
    try:
        path.write_text(text.replace(old, new))
        return plan_hashes(root)
    finally:
        path.write_text(text)


def changed(before: dict[str, object], after: dict[str, object]) -> set[str]:
    return {name for name in before if before[name] != after[name]}


def test_training_reads_no_registry_and_no_record():
    """The zoo's training reads params.yaml (the schema) and runs its model: a registry or record edit
    must not retrain it. stage_runner knows no record; config.py imports no table."""
    train = {p.as_posix() for p in stage_code("train", REPO)}
    assert not {p for p in train if p.startswith(("pipeline/core/registry", "pipeline/core/records"))}, train
    assert "pipeline/core/config.py" in train


@pytest.mark.parametrize(
    ("old", "new", "reached"),
    [
        # one variant's entry: its own stages, and select and report, which read every entry
        ('"float16 weights and compute, FP32 inputs/outputs kept (onnxruntime.transformers.float16)"',
         '"float16 weights and compute (edited)"', {"onnx_fp16"}),
        # a rescued variant's entry decides its fallback's build too
        ('"OpenVINO IR quantized by nncf.quantize on the calibration split"', '"nncf.quantize (edited)"',
         {"openvino_int8", "openvino_int8_acc"}),
    ],
)  # fmt: skip
def test_an_edit_to_one_registry_entry_reruns_only_that_variants_stages(project, before, old, new, reached):
    assert changed(before, edited(project, old, new)) == reached | {"stage_select", "stage_report"}


def test_an_edit_to_the_registrys_code_reaches_every_stage_that_runs_it(project, before):
    """Only the VARIANTS table is left out of a group's hash: the rest of the file is code."""
    old = '"""`names` (any container of variant names) in catalogue order: how tables list variants."""'
    after = edited(project, old, old.replace("catalogue order", "the catalogue's order"))
    readers = {f"stage_{group}" for group in STAGE_CODE if REGISTRY in stage_code(group, project)}
    assert {"stage_export", "stage_build", "stage_bench", "stage_select"} <= readers
    assert "stage_train" not in readers
    assert changed(before, after) >= readers and "stage_train" not in changed(before, after)
