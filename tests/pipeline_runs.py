"""What the tests that run the real pipeline share: run a command in a project, start a project the
way a user does (git, DVC, `dvc repro`), the project docs/development.md's recipes start from and what
they changed, read what a run wrote, and deploy one pinned variant."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import yaml

from pipeline.core import layout, registry
from pipeline.core.layout import short_name
from tests.conftest import REPO

ALWAYS_RUN = {"fingerprint/dvc.yaml:env"}
# serving/ written without running each engine release's runtime: tests/test_e2e.py's project and
# tests/test_serving_releases.py run them
UNCHECKED = {"check_versions": False}


def run(cmd: list[str], cwd: Path) -> str:
    env = os.environ | {
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "DVC_NO_ANALYTICS": "1",
    }
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


# `python -m pipeline add NAME ARGS...` for each (NAME, ARGS) of a JSON file, in one interpreter; each
# command's exit status, stdout and stderr back as JSON
_ADD_EACH = """
import contextlib, io, json, sys
from pipeline.cli import main

shown = {}
for name, args in json.loads(open(sys.argv[1]).read()).items():
    with contextlib.redirect_stdout(io.StringIO()) as printed, contextlib.redirect_stderr(io.StringIO()) as errors:
        code = main(["add", name, *args])
    shown[name] = {"code": code, "printed": printed.getvalue(), "errors": errors.getvalue()}
    if code:
        break
print(json.dumps(shown))
"""


def add_each(root: Path, added: dict[str, list[str]]) -> dict[str, str]:
    """`python -m pipeline add` of each model in `added` ({name: its arguments}) in `root`, in order, by
    one child interpreter: the CLI's own entry point per command, the imports paid once (a fresh
    interpreter per command is about 1 s more each). What each printed, by name; an error stops it."""
    commands = root.parent / "add_each.json"
    commands.write_text(json.dumps(added))
    shown = json.loads(run([sys.executable, "-c", _ADD_EACH, str(commands)], root).splitlines()[-1])
    failed = [f"{name} exited {each['code']}:\n{each['printed']}{each['errors']}" for name, each in shown.items()
              if each["code"]]  # fmt: skip
    assert not failed and list(shown) == list(added), failed or sorted(set(added) - set(shown))
    return {name: each["printed"] for name, each in shown.items()}


def init_project(root: Path) -> None:
    """git and DVC in a copied project, with the repository's plot templates and DVC config (its
    cache type: onnx reads no linked weights)."""
    run(["git", "init", "-q"], root)
    run(["dvc", "init", "-q"], root)
    shutil.copytree(REPO / ".dvc" / "plots", root / ".dvc" / "plots")
    shutil.copy(REPO / ".dvc" / "config", root / ".dvc" / "config")


def fast_project(root: Path) -> Path:
    """A copy of the repository at `root` set for the end-to-end tests: fast bench and contest, the CPU
    alone, single-pass variants only; a git and DVC repo as a user's clone is."""
    from tests.conftest import copy_project, write_params
    from tests.helpers import FAST_BENCH, FAST_CONTEST

    copy_project(root)
    params = yaml.safe_load((root / "params.yaml").read_text())
    params |= {"bench": FAST_BENCH, "targets": ["cpu"], "gpu_variants": {}, "serving": UNCHECKED}
    params["select"]["contest"] = FAST_CONTEST
    params["variants"] = {k: v for k, v in params["variants"].items() if not k.startswith("lm_")}
    write_params(root, params)
    init_project(root)
    return root


def keeping(source: str, *kept: str) -> list[str]:
    """A `source` model's `skip`: every single-pass variant that applies to its source kind but `kept` (the
    others stay not applicable for their own reason)."""
    applies = lambda v: not v.generates and (v.sources is None or source in v.sources)  # noqa: E731
    return [name for name, variant in registry.VARIANTS.items() if applies(variant) and name not in kept]


def git(root: Path, *args: str) -> str:
    return run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], root)


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


def recipe_project(root: Path, variants: list[str] | None = None) -> dict:
    """A copy of the repository at `root` as a user's project before one of docs/development.md's recipes
    (a backend, a variant, a source kind): one small ONNX model `tiny`, quick benchmarks, `variants` alone
    listed (None: params.yaml's lists as they are), the generated files current, committed in git with
    DVC set up. Its params, for the recipe to edit. The caller points PYTHONPATH at `root` first: the
    copy's own code runs in the children, not the repository's (the editable install's)."""
    from tests.conftest import copy_project, write_params
    from tests.helpers import FAST_BENCH

    copy_project(root)
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["models"] = ["tiny"]
    params["catalog"]["tiny"] = {"source": "onnx", "file": "model.onnx", "inputs": {"x": {"shape": ["batch", 12]}}}
    params["bench"], params["serving"] = FAST_BENCH, UNCHECKED
    if variants is not None:
        params["variants"] = {name: params["variants"].get(name, {}) for name in variants}
        params["machine_variants"], params["gpu_variants"] = {}, {}
        for entry in params["catalog"].values():  # the zoo's knobs for variants no longer listed go too
            entry["overrides"] = {name: knobs for name, knobs in entry.get("overrides", {}).items() if name in variants}
    write_params(root, params)
    write_tiny_onnx(root / "models" / "tiny" / "model.onnx")
    run([sys.executable, "-m", "pipeline", "docs", "--write"], root)
    init_project(root)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "the project")
    return params


def changed_files(root: Path) -> set[str]:
    """Every file git sees modified or new in `root` since its last commit."""
    return {line[3:] for line in git(root, "status", "--porcelain", "--untracked-files=all").splitlines()}


def written_by_repro(paths: set[str]) -> set[str]:
    """Of `paths`, those `dvc repro` may write (docs/development.md, "What the generators write"): stage
    outputs under reports/ (artifacts/ is git-ignored), dvc.lock files and DVC's .gitignore entries."""
    return {p for p in paths if p.startswith("reports/") or Path(p).name in ("dvc.lock", ".gitignore")}


def commit_and_repro(root: Path) -> str:
    """Commit everything, then the root pipeline as a user types it (`python -m pipeline repro`: `dvc
    repro` with the progress line, and reports/logs/repro_time.json saying where the time went); DVC's
    output."""
    git(root, "add", "-A")
    git(root, "commit", "-qm", "init")
    run([sys.executable, "-m", "pipeline", "repro"], root)
    return layout.repro_log(root).read_text()


def stages_run(output: str) -> set[str]:
    """Stages DVC ran, a variant's build and bench as `build@<model>-<variant>` (layout.short_name)."""
    return {short_name(n) for n in re.findall(r"Running stage '([^']+)'", output)}


def read(path: Path) -> dict:
    return json.loads(path.read_text())


def metrics(root: Path, model: str, variant: str) -> dict:
    """The full record of a variant (its details file: what the summary, report and selection read)."""
    return read(root / "reports" / "details" / model / f"{variant}.json")


def tracked(root: Path, model: str, variant: str) -> dict:
    """What DVC tracks as the variant's metric."""
    return read(root / "reports" / "metrics" / model / f"{variant}.json")


def reference(root: Path, model: str):
    from pipeline.core.data import DataSet

    return DataSet.load(layout.source_dir(model, root) / layout.REFERENCE).head(64)


def pinned_deploy_predicts(root: Path, side: Path, model: str, variant: str) -> None:
    """Pin the choice to one variant (select.constraints.variants) in a side project, then predict
    the source's reference rows through `python -m pipeline predict` and compare the labels."""
    (side / "reports").mkdir(parents=True)
    for name in ("artifacts", "models", "reports/details", "reports/metrics", "reports/env.json"):
        (side / name).symlink_to(root / name)
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["select"]["constraints"] |= {
        "variants": [variant],
        "max_metric_drop": None,
        "min_cosine": None,
        "max_rel_error": None,
        "min_top1_agreement": None,
        "min_neighbour_recall": None,
    }
    params["select"]["models"] = {}  # nor a model's own constraints
    params["serving"] = params["serving"] | UNCHECKED  # predict is what is checked here; serving/, the project's
    (side / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    run([sys.executable, str(root / "stages" / "select_artifact.py"), model], side)
    manifest = read(side / "deploy" / model / "manifest.json")
    assert manifest["variant"] == variant
    data = reference(root, model)
    np.savez(side / "x.npz", **data.inputs)
    run([sys.executable, "-m", "pipeline", "predict", str(side / "deploy" / model), "x.npz", "--output", "y.npz"], side)
    with np.load(side / "y.npz") as got:
        for name, expected in data.outputs.items():
            labels = (lambda y: y[:, 0] > 0.5) if expected.shape[1] == 1 else (lambda y: y.argmax(1))
            assert (labels(got[name]) == labels(expected)).mean() >= 0.95, name
