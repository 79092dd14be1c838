"""The CI runner matrix (.github/workflows/machines.yml) cannot run here: lint it against GitHub's
workflow schema (check-jsonschema's bundled copy; actionlint's PyPI package downloads its binary
from GitHub at install time, which these machines cannot reach) and check it runs our commands."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO

WORKFLOW = REPO / ".github" / "workflows" / "machines.yml"


def lint(path: Path) -> subprocess.CompletedProcess[str]:
    tool = Path(sys.executable).parent / "check-jsonschema"  # the test extra, beside this Python
    assert tool.is_file(), "check-jsonschema is not installed: pip install -e '.[test]'"
    cmd = [str(tool), "--builtin-schema", "vendor.github-workflows", str(path)]
    return subprocess.run(cmd, capture_output=True, text=True)


def test_the_workflow_passes_the_schema_and_a_broken_one_does_not(tmp_path):
    assert lint(WORKFLOW).returncode == 0, lint(WORKFLOW).stdout
    broken = tmp_path / "broken.yml"
    broken.write_text(WORKFLOW.read_text().replace("runs-on: ubuntu-latest", "runs_on: ubuntu-latest"))
    assert lint(broken).returncode != 0


def test_each_machine_measures_on_its_own_runner_and_keeps_its_results_branch():
    jobs = yaml.safe_load(WORKFLOW.read_text())["jobs"]
    measure = jobs["measure"]
    machines = [entry["machine"] for entry in measure["strategy"]["matrix"]["include"]]
    assert len(machines) == len(set(machines)) >= 2
    assert measure["runs-on"] == ["self-hosted", "${{ matrix.machine }}"]
    assert measure["env"]["MODELOPT_MACHINE"] == "${{ matrix.machine }}"
    assert measure["needs"] == "shared" and jobs["collect"]["needs"] == "measure"
    runs = {name: "\n".join(step.get("run", "") for step in job["steps"]) for name, job in jobs.items()}
    # docs/machines.md's flow (tests/test_machines.py runs it): restore with `repro --pull`, push the run cache
    assert "dvc repro --pull $(python -m pipeline stages --portable-builds)" in runs["shared"]
    assert "python -m pipeline repro --pull" in runs["measure"]
    assert "dvc push --run-cache" in runs["shared"] and "dvc push --run-cache" in runs["measure"]
    assert 'git switch -c "results/$MODELOPT_MACHINE"' in runs["measure"]
    assert 'gate --rev "origin/results/$MODELOPT_MACHINE"' in runs["measure"]
    assert "summary --machines" in runs["collect"]


def test_every_pipeline_command_in_the_workflow_exists():
    from pipeline.cli import main

    commands = set(re.findall(r"python -m pipeline (\w+)", WORKFLOW.read_text()))
    assert commands >= {"repro", "summary", "gate"}
    for command in commands:
        with pytest.raises(SystemExit) as exited:
            main([command, "--help"])
        assert exited.value.code == 0, command


def test_the_repro_command_hands_dvc_its_options(monkeypatch):
    import pipeline.progress
    from pipeline.cli import main

    handed = []
    monkeypatch.setattr(pipeline.progress, "repro_with_progress", lambda dvc_args: handed.append(dvc_args) or 0)
    assert main(["repro", "--pull", "-f", "export"]) == 0 and main(["repro", "export", "--pull"]) == 0
    assert handed == [["--pull", "-f", "export"], ["export", "--pull"]]
