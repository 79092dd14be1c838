"""What the tests that run the real pipeline share: run a command in a project, start a project the
way a user does (git, DVC, `dvc repro`), read what a run wrote, and deploy one pinned variant."""

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

from pipeline.core import layout
from pipeline.core.layout import short_name
from tests.conftest import REPO

ALWAYS_RUN = {"fingerprint/dvc.yaml:env"}


def run(cmd: list[str], cwd: Path) -> str:
    env = os.environ | {
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "DVC_NO_ANALYTICS": "1",
    }
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


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
    params |= {"bench": FAST_BENCH, "targets": ["cpu"], "gpu_variants": {}}
    params["select"]["contest"] = FAST_CONTEST
    params["variants"] = {k: v for k, v in params["variants"].items() if not k.startswith("lm_")}
    write_params(root, params)
    init_project(root)
    return root


def commit_and_repro(root: Path) -> str:
    """Commit everything, then the root pipeline as a user types it; DVC's output."""
    run(["git", "add", "-A"], root)
    run(["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "init"], root)
    return run(["dvc", "repro"], root)


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
        "max_accuracy_drop": None,
        "min_cosine": None,
        "max_rel_error": None,
        "min_top1_agreement": None,
        "min_neighbour_recall": None,
    }
    params["select"]["models"] = {}  # nor a model's own constraints
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
