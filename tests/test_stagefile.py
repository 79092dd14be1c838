"""dvc.yaml is generated (pipeline.stagefile) and each stage depends on its code through the plan's
hash of its import walk (pipeline.optimize.plan): the committed files are current, every stage's code
is the code it runs, and an edit reaches only the stages that run it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pipeline.core import layout, registry
from pipeline.core.config import load_params
from pipeline.core.errors import ConfigError
from pipeline.docs import check_or_write as docs_check
from pipeline.optimize.applicability import not_applicable
from pipeline.optimize.plan import STAGE_CODE, stage_code, variant_code, write_plan
from pipeline.stagefile import (
    ALWAYS_FILE,
    ROOT_FILE,
    check_or_write,
    first_benched,
    render,
    require_current,
    stage_file,
)
from tests.conftest import copy_project

REPO = Path(__file__).parents[1]


def code_of(group: str) -> set[str]:
    return {p.as_posix() for p in stage_code(group, REPO)}


def test_committed_stage_files_are_current():
    assert check_or_write(REPO) == 0, "run `python -m pipeline stages --write`"
    assert (REPO / ROOT_FILE).is_file() and (REPO / ALWAYS_FILE).is_file()


def test_generated_doc_tables_are_current():
    assert docs_check(REPO) == 0, "run `python -m pipeline docs --write`"


def test_each_stage_depends_on_its_codes_hash_not_on_code_files():
    files = render(REPO)
    stages = yaml.safe_load(files[ROOT_FILE])["stages"]
    for path in files:
        if path.parts[0] == layout.VARIANT_STAGES.name:
            stages |= {f"{path.parent.name}:{n}": s for n, s in yaml.safe_load(files[path])["stages"].items()}
    assert {"onnx_fp32:build", "onnx_fp32:bench", "onnx_int8_static:build"} <= set(stages)
    for name, stage in stages.items():
        deps = stage.get("do", stage)["deps"]
        if name == "plan":
            assert deps == ["pipeline", "stages"]  # it hashes them: any edit reruns it, in seconds
            continue
        group = name.rpartition(":")[2]
        assert stage_file(group) in deps, name
        assert not [d for d in deps if d.startswith(("pipeline/", "stages/"))], name


def test_a_fallbacks_build_waits_for_the_record_of_the_variant_it_rescues():
    """openvino_int8_acc decides from openvino_int8's measured record whether its search is needed: DVC
    runs that bench first, and reruns the fallback's build when the record changes."""
    files = render(REPO)
    fallback = yaml.safe_load(files[layout.variant_stage_file("openvino_int8_acc")])["stages"]["build"]["do"]
    assert "reports/details/${item}/openvino_int8.json" in fallback["deps"]
    plain = yaml.safe_load(files[layout.variant_stage_file("openvino_int8")])["stages"]["build"]["do"]
    assert not [d for d in plain["deps"] if d.startswith("reports/details")]


def foreach(root: Path, variant: str) -> list[str]:
    """The models variant `variant` has build stages for in the project at `root`."""
    stages = yaml.safe_load(layout.variant_stage_file(variant, root).read_text())["stages"]
    assert stages["bench"]["foreach"] == stages["build"]["foreach"]
    return stages["build"]["foreach"]


def test_each_variant_has_its_own_stage_file_and_the_plan_stops_when_they_differ_from_params(tmp_path):
    """A variant's stages and lock live in variants/<variant>/ (DVC rewrites a whole lock after each
    stage); the files follow params.yaml's lists, and the plan stage names the command when they do not."""
    root = copy_project(tmp_path / "project")
    assert (
        check_or_write(root) == 0 and layout.dvc_stage("bench", "m", "onnx_opt") == "variants/onnx_opt/dvc.yaml:bench@m"
    )
    assert layout.short_name("variants/onnx_opt/dvc.yaml:bench@spam_fnn") == "bench@spam_fnn-onnx_opt"
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["variants"].pop("onnx_fp16")
    params["gpu_variants"], params["targets"] = {"onnx_cuda_fp32": {}}, ["cpu", "cuda:0"]
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    differ = r"onnx_cuda_fp32 \(listed, no stages\); onnx_fp16 \(stages, not listed\)"
    with pytest.raises(ConfigError, match=differ + ": run `python -m pipeline stages --write`, then `dvc repro` again"):
        require_current(load_params(root / "params.yaml"), root)
    assert check_or_write(root) == 1
    check_or_write(root, write=True)
    assert (
        not (root / "variants" / "onnx_fp16").exists() and (root / "variants" / "onnx_cuda_fp32" / "dvc.yaml").is_file()
    )
    require_current(load_params(root / "params.yaml"), root)
    assert check_or_write(root) == 0


def test_only_pairs_that_can_apply_get_stages_and_only_listed_zoo_models_train(tmp_path):
    """A model added to params.yaml gets stages for the variants that apply to its source kind and
    task, no others; the train stage trains the zoo models `models` names, not every `train` entry.
    Until the files are rewritten, the plan stage (the first `dvc repro` runs) stops with one line."""
    root = copy_project(tmp_path / "project")
    params = load_params(root / "params.yaml")
    assert "tiny_lm" not in foreach(root, "onnx_fp32") and foreach(root, "lm_torch") == ["tiny_lm"]
    assert foreach(root, "jax_jit") == ["digits_jax"] and "digits_gru" not in params.models
    assert "digits_gru" in params.train and "digits_gru" not in yaml.safe_load((root / ROOT_FILE).read_text())[
        "stages"]["train"]["foreach"]  # fmt: skip
    raw = yaml.safe_load((root / "params.yaml").read_text())
    raw["catalog"]["foreign"] = {"source": "onnx", "file": "model.onnx", "inputs": {"x": {"shape": ["batch", 4]}}}
    raw["models"] = ["foreign", "digits_jax"]
    (root / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    with pytest.raises(ConfigError, match="no stages for onnx_fp32 for foreign; onnx_opt for foreign; "):
        require_current(load_params(root / "params.yaml"), root)
    check_or_write(root, write=True)
    assert foreach(root, "onnx_fp32") == ["foreign", "digits_jax"] and foreach(root, "jax_jit") == ["digits_jax"]
    assert foreach(root, "torch_eager") == [] and foreach(root, "lm_torch") == []
    assert yaml.safe_load((root / ROOT_FILE).read_text())["stages"]["train"]["foreach"] == ["digits_jax"]
    left_out = not_applicable(load_params(root / "params.yaml"), "foreign")
    assert left_out["torch_eager"].reason == "needs a torch source; foreign is a onnx model"
    assert "lm_torch" in left_out and "onnx_opt" not in left_out
    # an experiment on a subset of the models runs with the files as they are (their stages up to date)
    raw["models"] = ["foreign"]
    (root / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    require_current(load_params(root / "params.yaml"), root)


def test_each_stage_groups_code_is_what_its_entry_runs():
    assert "pipeline/measure/worker.py" in code_of("bench")  # a child process's entry, named by string
    assert "pipeline/prepare/sources/tfkeras.py" in code_of("export")
    assert "stages/report.py" in code_of("report") and "pipeline/present/report.py" in code_of("report")


def test_report_code_reaches_only_the_report_stage():
    assert {g for g in STAGE_CODE if "pipeline/present/report.py" in code_of(g)} == {"report"}


def test_a_pass_reaches_only_its_variants():
    """No stage group runs a pass but through the registry (only their shared base): each variant's
    plan file carries its own pass's hash."""
    shared = {"pipeline/optimize/passes/__init__.py", "pipeline/optimize/passes/base.py"}
    for group in STAGE_CODE:
        assert not {p for p in code_of(group) if p.startswith("pipeline/optimize/passes/")} - shared, group
    fp16 = Path("pipeline/optimize/passes/onnxruntime/fp16.py")
    users = {v for v in registry.VARIANTS if fp16 in variant_code(v, REPO)}
    assert {"onnx_fp16", "onnx_cuda_fp16"} <= users
    assert not users & {"onnx_fp32", "onnx_int8_static", "openvino_int8", "torch_eager"}


def test_the_plan_stage_checks_every_variants_knobs_before_anything_is_built(tmp_path):
    root = copy_project(tmp_path / "project")
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["variants"]["onnx_opt"]["levle"] = "basic"
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    loaded = load_params(root / "params.yaml")  # reading params.yaml imports no pass: the typo passes here
    with pytest.raises(ConfigError, match=r"params.yaml: variants.onnx_opt.levle: unknown key"):
        write_plan(loaded, root)
    assert not layout.plan_dir(root).exists()


def test_each_model_benches_first_the_variant_most_often_fastest(tmp_path):
    """The select stage lists that variant's record before the model's folder of records, and DVC runs
    dependencies in the order listed (`dvc repro` of the whole pipeline: a targeted one orders its
    subgraph otherwise): its bench runs before the model's other benches, so the
    out-of-contention screen has a fast figure to cut the slower variants' benches short."""
    import subprocess
    import sys

    params = load_params(REPO / "params.yaml")
    assert first_benched(params, "minilm_l6") == "openvino_int8" and first_benched(params, "tiny_lm") == "lm_onnx_int8"
    select = yaml.safe_load(render(REPO)[ROOT_FILE])["stages"]["select"]
    assert select["foreach"]["tiny_lm"] == {"first": "reports/details/tiny_lm/lm_onnx_int8.json"}
    assert select["do"]["deps"][:2] == ["${item.first}", "reports/details/${key}"]
    root = copy_project(tmp_path / "project")
    dvc = [sys.executable, "-m", "dvc"]
    for cmd in (["git", "init", "-q"], [*dvc, "init", "-q"]):
        subprocess.run(cmd, cwd=root, check=True, capture_output=True)
    dry = subprocess.run([*dvc, "repro", "--dry", "-f"], cwd=root, capture_output=True, text=True)  # as the README
    benches = [line for line in dry.stdout.splitlines() if "dvc.yaml:bench@minilm_l6" in line]
    assert len(benches) > 3 and "variants/openvino_int8/" in benches[0], dry.stdout[-2000:]
