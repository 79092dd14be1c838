"""ResNet-50's bench stages, timed: every variant's `dvc repro` bench stage, then select and report,
after the builds (goal: at most 3 min in total on 2 cores), with where each stage spent its time.

A scratch copy of the project (git + DVC, `models: [resnet50]`) runs `dvc repro` once to build
everything, then each bench stage is forced again with `dvc repro -s -f` and timed by wall clock,
as a user's `dvc repro` pays it (DVC and Python start-up included). The per-phase seconds come from
each variant's `phase_s` in reports/details.

    python -m benchmarks.resnet50_bench_time [--keep]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import yaml

from pipeline.core import layout
from pipeline.core.config import PARAMS_FILE
from pipeline.core.files import read_json, write_json
from pipeline.machine.fingerprint import fingerprint

REPO = Path(__file__).resolve().parents[1]
MODEL, GOAL_S = "resnet50", 180
COPIED = ("pipeline", "stages", "models", "fingerprint", "variants", "dvc.yaml", "params.yaml", ".dvcignore")
REPRO = ["dvc", "repro"]


def run(cmd: list[str], cwd: Path) -> float:
    env = os.environ | {"PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "DVC_NO_ANALYTICS": "1"}
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def scratch_repo() -> Path:
    root = Path(tempfile.mkdtemp(prefix="resnet50-bench-time-"))
    ignore = shutil.ignore_patterns("__pycache__", "trained", "dvc.lock")
    for name in COPIED:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, root / name, ignore=ignore)
        elif source.exists():
            shutil.copy2(source, root / name)
    params = yaml.safe_load((root / PARAMS_FILE).read_text()) | {"models": [MODEL], "train": {}}
    (root / PARAMS_FILE).write_text(yaml.safe_dump(params, sort_keys=False))
    for cmd in (["git", "init", "-q"], ["dvc", "init", "-q"], ["git", "add", "-A"]):
        run(cmd, root)
    return root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the scratch project")
    parser.add_argument("--out", type=Path, default=Path("reports/benchmarks/resnet50_bench_time.json"))
    args = parser.parse_args()
    root = scratch_repo()
    try:
        build_s = run(REPRO, root)
        params = yaml.safe_load((root / PARAMS_FILE).read_text())
        stages = [layout.dvc_stage("bench", MODEL, v) for v in [*params["variants"], *params["machine_variants"]]]
        stages += [f"select@{MODEL}", "report"]
        seconds = {stage: run(["dvc", "repro", "-s", "-f", stage], root) for stage in stages}
        phases: Counter[str] = Counter()
        for variant in [*params["variants"], *params["machine_variants"]]:
            details = read_json(layout.details_file(MODEL, variant, root))
            phases.update(details.get("phase_s", {}))
        total = sum(seconds.values())
        result = {
            "cpu": fingerprint()["cpu"]["model"],
            "first_repro_s": build_s,
            "bench_select_report_s": total,
            "goal_s": GOAL_S,
            "met": total <= GOAL_S,
            "stage_s": seconds,
            "phase_s_sum": dict(phases.most_common()),
        }
        write_json(args.out, result)
        print(f"{len(stages)} stages in {total:.0f} s (goal <= {GOAL_S} s: {'met' if result['met'] else 'missed'})")
        print("bench children, summed:", ", ".join(f"{k} {v:.0f} s" for k, v in phases.most_common()))
        for stage, s in sorted(seconds.items(), key=lambda kv: -kv[1])[:8]:
            print(f"  {stage:40s} {s:6.1f} s")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
