"""Machine classes: names, the refusal of a stale env.json, two machines sharing one DVC remote with
their results on their own branches, and the experiment queue."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from pipeline.core import layout
from pipeline.core.errors import ConfigError
from pipeline.core.files import write_json
from pipeline.core.layout import short_name
from pipeline.core.records.env import Cpu, Env, MachineName
from pipeline.machine import naming as machines
from pipeline.present.compare import key_variants
from tests.conftest import copy_project, write_params
from tests.helpers import FAST_BENCH, FAST_CONTEST, metric
from tests.pipeline_runs import UNCHECKED


def fingerprint(vendor="GenuineIntel", family="6", model_id="143", cores=16, gpus="none", name="Xeon") -> Env:
    return Env(cpu=Cpu(vendor=vendor, family=family, model_id=model_id, cores=cores, model=name), gpus=gpus)


def test_hardware_names_come_from_the_fingerprint():
    assert machines.hardware_name(fingerprint()) == "intel-6-143-16c"
    two_gpus = fingerprint("AuthenticAMD", "25", "17", 64, "NVIDIA H100 80GB HBM3, NVIDIA H100 80GB HBM3")
    assert machines.hardware_name(two_gpus) == "amd-25-17-64c-2x-nvidia-h100-80gb-hbm3"
    arm = fingerprint("ARM", "", "", 8, name="Neoverse-V2")
    assert machines.hardware_name(arm) == "arm-neoverse-v2-8c"


def test_the_environment_names_a_machine_and_a_bad_name_is_one_error(monkeypatch):
    monkeypatch.delenv(machines.ENV_VAR, raising=False)
    derived = machines.current()
    assert derived.source == "fingerprint" and derived.name == derived.hardware
    monkeypatch.setenv(machines.ENV_VAR, "gpu-server.a100")
    assert machines.current() == MachineName(name="gpu-server.a100", source="MODELOPT_MACHINE", hardware=derived.name)
    monkeypatch.setenv(machines.ENV_VAR, "Bad Name")
    with pytest.raises(ConfigError, match="MODELOPT_MACHINE: machine name 'Bad Name'"):
        machines.current()


def test_a_measurement_refuses_an_env_json_from_other_hardware(tmp_path, machine):
    with pytest.raises(ConfigError, match=r"machine.hardware: missing, this is .*: run `dvc repro`"):
        machines.require_same_hardware(tmp_path)
    env = layout.env_file(tmp_path)
    write_json(env, {"machine": {"name": "box", "hardware": "amd-25-17-64c"}})
    with pytest.raises(ConfigError, match=r"machine\.hardware: amd-25-17-64c, this is"):
        machines.require_same_hardware(tmp_path)
    write_json(env, {"machine": machines.current().model_dump()})
    assert machines.require_same_hardware(tmp_path).name == "box"


def test_key_variants_are_the_choice_the_baseline_and_the_fastest_per_target_and_precision():
    metrics = {
        "torch_eager": metric(3.0),
        "onnx_fp32": metric(1.0),
        "onnx_opt": metric(0.9),
        "int8_a": metric(0.5, precision="int8"),
        "int8_b": metric(0.4, precision="int8"),
        "gpu": metric(0.2, device="cuda:0"),
        "broken": metric(1.0, status="failed"),
    }
    assert key_variants(metrics, "int8_a", "torch_eager") == ["int8_a", "torch_eager", "gpu", "int8_b", "onnx_opt"]


# Two machines, one DVC remote -----------------------------------------------------------------


def sh(cmd: list[str], cwd: Path, machine: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    env = os.environ | {"PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "DVC_NO_ANALYTICS": "1"}
    env |= {machines.ENV_VAR: machine} if machine else {}
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    assert not check or done.returncode == 0, f"{' '.join(cmd)}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def git(cwd: Path, *args: str) -> str:
    return sh(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd).stdout


def ran(output: str) -> set[str]:
    return {short_name(n) for n in re.findall(r"Running stage '([^']+)'", output)}


def repro(cwd: Path, machine: str) -> set[str]:
    return ran(sh([sys.executable, "-m", "pipeline", "repro"], cwd, machine).stdout)


def documented(*command: str) -> list[str]:
    """`command`, once docs/machines.md is seen to give it as a command line: the test runs the
    documented flow, so a doc that drifts from what works fails here."""
    page = (Path(__file__).parents[1] / "docs" / "machines.md").read_text()
    lines = {part.strip() for line in page.splitlines() for part in line.split("#")[0].split("&&")}
    assert " ".join(command) in lines, f"docs/machines.md no longer gives `{' '.join(command)}`"
    return list(command)


def tiny_project(folder: Path, onnx_file: Path, models: tuple[str, ...] = ("m",)) -> Path:
    """The repository's pipeline on copies of the tiny ONNX model: two portable variants, one
    machine variant, fast benchmark settings."""
    root = copy_project(folder)
    params = yaml.safe_load((root / "params.yaml").read_text())
    params |= {"models": list(models), "targets": ["cpu"], "train": {}, "bench": FAST_BENCH, "serving": UNCHECKED}
    params["select"]["contest"] = FAST_CONTEST
    spec = {"source": "onnx", "file": "model.onnx", "inputs": {"x": {"shape": ["batch", 12]}}}
    params["catalog"] = dict.fromkeys(models, spec)
    params["variants"] = {"onnx_fp32": {}, "onnx_opt": params["variants"]["onnx_opt"]}
    params["machine_variants"] = {"onnx_int8_dynamic": params["machine_variants"]["onnx_int8_dynamic"]}
    write_params(root, params)
    for model in models:
        (root / "models" / model).mkdir()
        shutil.copy(onnx_file, root / "models" / model / "model.onnx")
    return root


@pytest.mark.slow
def test_two_machines_share_builds_through_a_dvc_remote_and_keep_results_on_their_branches(tmp_path, tiny_onnx):
    """The flow of docs/machines.md: beta, a clone of main (no dvc.lock of alpha's), restores the
    shared stages from the remote's run cache with `dvc repro --pull` and reruns none of them. Slow
    (about 50 s on 2 cores): two clones of a project, each a whole `dvc repro`, and a DVC remote."""
    alpha = tiny_project(tmp_path / "alpha", tiny_onnx)
    origin, remote = tmp_path / "origin.git", tmp_path / "dvc-remote"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    git(alpha, "init", "-q", "-b", "main")
    sh(["dvc", "init", "-q"], alpha)
    sh(["dvc", "remote", "add", "-d", "shared", str(remote)], alpha)
    git(alpha, "add", "-A")
    git(alpha, "commit", "-qm", "project")
    git(alpha, "remote", "add", "origin", str(origin))
    git(alpha, "push", "-q", "origin", "main")

    # Machine alpha runs the pipeline, pushes builds and run cache, commits to results/alpha.
    first = ran(sh(documented("dvc", "repro"), alpha, "alpha").stdout)
    assert {"export@m", "build@m-onnx_fp32", "build@m-onnx_opt", "build@m-onnx_int8_dynamic"} <= first
    sh(documented("dvc", "push", "--run-cache"), alpha)
    git(alpha, "switch", "-q", "-c", "results/alpha")
    git(alpha, "add", "-A")
    git(alpha, "commit", "-qm", "alpha: results")
    git(alpha, "push", "-q", "origin", "results/alpha")

    # Machine beta: a clone of main with another name. It takes the portable builds from the run
    # cache, builds its own machine variant and measures everything again: nothing of alpha's replays.
    beta = tmp_path / "beta"
    git(tmp_path, "clone", "-q", str(origin), str(beta))
    git(beta, "switch", "-q", "-c", "results/beta", "origin/main")
    second = ran(sh(documented("dvc", "repro", "--pull"), beta, "beta").stdout)
    assert not {"export@m", "build@m-onnx_fp32", "build@m-onnx_opt"} & second, second
    assert {"build@m-onnx_int8_dynamic", "bench@m-onnx_opt", "bench@m-onnx_int8_dynamic"} <= second
    assert (beta / "artifacts" / "m" / "onnx_opt").is_dir() and (beta / "reports" / "export" / "m.json").is_file()
    for path in (layout.details_dir(beta) / "m").glob("*.json"):
        assert json.loads(path.read_text())["machine"] == "beta", path
    sh(documented("dvc", "push", "--run-cache"), beta)
    git(beta, "add", "-A")
    git(beta, "commit", "-qm", "beta: results")
    git(beta, "fetch", "-q", "origin")

    # Both machines side by side, each row under the machine that measured it.
    table = sh([sys.executable, "-m", "pipeline", "summary", "--machines"], beta).stdout
    assert "alpha" in table and "beta" in table and "(deploy)" in table
    sh([sys.executable, "-m", "pipeline", "summary", "--machines", "--output", "machines.md"], beta)
    page = (beta / "machines.md").read_text()
    assert page.count("| alpha |") >= 2 and page.count("| beta |") >= 2
    diff = json.loads(sh(["dvc", "metrics", "diff", "--json", "origin/results/alpha"], beta).stdout)
    assert "reports/metrics/m/onnx_opt.json" in diff  # the same metric, measured on two machines


@pytest.mark.slow
def test_the_experiment_queue_runs_experiments_side_by_side(tmp_path, tiny_onnx):
    """`dvc exp run --queue` + parallel workers on the root pipeline: each experiment's builds
    may overlap, its benchmarks wait for the machine lock (waited_s), and every result comes back.
    Slow (about 1 min on 2 cores): two DVC experiments of a whole project, side by side; one variant each."""
    root = tiny_project(tmp_path / "project", tiny_onnx, models=("m1", "m2"))
    params = yaml.safe_load((root / "params.yaml").read_text())
    params |= {"variants": {"onnx_opt": params["variants"]["onnx_opt"]}, "machine_variants": {}}
    write_params(root, params)
    git(root, "init", "-q")
    sh(["dvc", "init", "-q"], root)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "project")
    for model in ("m1", "m2"):
        sh(["dvc", "exp", "run", "--queue", "-S", f"models=[{model}]", "-n", model], root, "q")
    sh(["dvc", "queue", "start", "-j", "2"], root, "q")  # two workers, in the background
    deadline = time.monotonic() + 600
    try:
        while time.monotonic() < deadline:
            status = sh(["dvc", "queue", "status"], root).stdout
            if not re.search(r"\b(Queued|Running)\b", status):
                break
            time.sleep(2)
    finally:
        sh(["dvc", "queue", "stop", "--kill"], root, check=False)
    assert status.count("Success") == 2, status
    shown = json.loads(sh(["dvc", "exp", "show", "--json"], root).stdout)
    experiments = {e["name"]: e for run in shown for e in run.get("experiments") or []}
    assert set(experiments) == {"m1", "m2"}
    for name, experiment in experiments.items():
        revision = experiment["revs"][0]
        metrics = revision["data"]["metrics"]
        opt = metrics[f"reports/metrics/{name}/onnx_opt.json"]["data"]
        assert opt["status"] == "ok" and opt["p50_ms"] > 0
