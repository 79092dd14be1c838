"""Every benchmark script runs: each with `--smoke` (the smallest real run of its code path, see its
docstring) in a temporary folder, exiting 0 and writing its result, so that none rots while the code it
measures moves. The figures are not looked at: a smoke run measures nothing worth keeping."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

OUT = ["--out", "{tmp}/out.json"]


def smoke(script: str, args: list[str] = OUT, written: str = "out.json", slow: bool = False):
    """A script, its smoke run's extra arguments ({tmp}: the test's folder) and the file it writes there."""
    return pytest.param(script, args, written, id=script, marks=[pytest.mark.slow] if slow else [])


# the slow ones (15-45 s each on 2 cores) run the pipeline (add, export, builds, a contest) on a tiny model
SMOKE = [
    smoke("value_checks"),
    smoke("stage_memory", ["--out", "{tmp}/out.txt"], "out.txt"),
    smoke("bench_cost"),
    smoke("choice_stability"),
    smoke("harness_overhead"),
    smoke("foreign_models"),
    smoke("serving_load"),
    smoke("foreign_corpus", ["{tmp}"], "smoke.json"),
    smoke("package_decisions"),
    smoke("contest_separation"),
    smoke("contest_agreement"),
    smoke("openvino_crosscheck"),
    smoke("pipeline_timing", slow=True),
    smoke("transformer_int8", slow=True),
    smoke("openvino_int8_recipes", slow=True),
    smoke("article_table", slow=True),
]


def test_every_benchmark_has_a_smoke_run():
    scripts = {p.stem for p in (REPO / "benchmarks").glob("*.py")} | {"foreign_corpus"}
    # shared by the scripts, not run on their own (package_readers: package_decisions reads with it)
    helpers = {"__init__", "scratch", "smoke", "package_readers"}
    assert scripts - helpers == {param.values[0] for param in SMOKE}


@pytest.mark.parametrize(("script", "args", "written"), SMOKE)
def test_benchmark_smoke_run(script: str, args: list[str], written: str, tmp_path: Path):
    env = os.environ | {"PYTHONPATH": str(REPO), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    cmd = [sys.executable, "-m", f"benchmarks.{script}", "--smoke", *(a.format(tmp=tmp_path) for a in args)]
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{' '.join(cmd)}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert (tmp_path / written).stat().st_size > 0
    assert done.stdout.strip()
