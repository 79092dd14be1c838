"""Pipeline timing, wall-clock of the real commands:

- a no-op `dvc repro` in this repository (goal <= 3 s), median of --noop-runs;
- with --byom: the README's bring-your-own example (a 32-64-4 PyTorch MLP, `my_mlp`) from params to
  a choice in a scratch copy of the project (goal <= 90 s), with where the time went: the bench
  child processes, the builds, and the rest (process starts, imports, DVC);
- with --from-scratch SECONDS: a from-scratch run of the default zoo timed elsewhere (e.g. `time dvc
  repro` on a fresh clone), recorded beside the goal (<= 12 min).

    python benchmarks/pipeline_timing.py [--noop-runs 5] [--byom] [--from-scratch 1234]

Nothing else may run meanwhile (a second process on 2 cores changes every figure).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
import yaml

from pipeline.core import layout
from pipeline.core.files import read_json, write_json
from pipeline.machine.fingerprint import fingerprint

REPO = Path(__file__).resolve().parents[1]
REPRO = ["dvc", "repro"]  # the root pipeline, as a user types it
ENV = os.environ | {"PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "DVC_NO_ANALYTICS": "1"}
MLP = textwrap.dedent(
    """
    from torch import nn


    def build() -> nn.Module:
        return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
    """
)


def timed(cmd: list[str], cwd: Path = REPO) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    return time.perf_counter() - start


def byom_project() -> Path:
    """A scratch copy of the project whose only model is the README's my_mlp, committed in git."""
    import torch

    root = Path(tempfile.mkdtemp(prefix="byom-")) / "project"
    keep = ["pipeline", "stages", "models/__init__.py", "models/common", "params.yaml", "pyproject.toml", "dvc.yaml",
            "fingerprint/dvc.yaml", ".dvc/plots"]  # fmt: skip
    for name in keep:
        source, target = REPO / name, root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(source, target)
    folder = root / "models" / "my_mlp"
    folder.mkdir()
    (folder / "net.py").write_text(MLP)
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    torch.save(module.state_dict(), folder / "weights.pt")
    x = np.random.default_rng(0).standard_normal((512, 32)).astype(np.float32)
    np.savez(folder / "eval.npz", x=x, labels=module(torch.from_numpy(x)).argmax(1).detach().numpy())
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["models"], params["train"] = ["my_mlp"], {}
    params["catalog"]["my_mlp"] = {
        "source": "torch", "factory": "models.my_mlp.net:build", "file": "weights.pt",
        "inputs": {"x": {"shape": ["batch", 32], "dtype": "float32"}}, "outputs": ["scores"],
        "eval_data": "eval.npz", "metric": "accuracy",
    }  # fmt: skip
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    for cmd in (["git", "init", "-q"], ["dvc", "init", "-q"], ["git", "add", "-A"],
                ["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "my_mlp"]):  # fmt: skip
        subprocess.run(cmd, cwd=root, check=True, capture_output=True, env=ENV)
    return root


def byom_timing() -> dict:
    root = byom_project()
    try:
        total = timed(REPRO, root)
        details = [read_json(p) for p in (root / "reports" / "details" / "my_mlp").glob("*.json")]
        builds = [read_json(p / layout.BUILD_INFO) for p in (root / "artifacts" / "my_mlp").iterdir()]
        bench_s = sum(d.get("process_s", 0.0) for d in details)
        build_s = sum(b["build"].get("seconds", 0.0) for b in builds if b.get("build"))
        stages = len(subprocess.run(["dvc", "stage", "list", "--all", "--name-only"], cwd=root, capture_output=True,
                                    text=True, env=ENV).stdout.split())  # fmt: skip
        return {
            "byom_s": total,
            "byom_goal_s": 90,
            "byom_stages": stages,
            "byom_bench_process_s": bench_s,
            "byom_build_pass_s": build_s,
            "byom_other_s": total - bench_s - build_s,
            "byom_chosen": read_json(root / "reports" / "selection" / "my_mlp.json")["chosen"],
        }
    finally:
        shutil.rmtree(root.parent, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--noop-runs", type=int, default=5)
    parser.add_argument("--byom", action="store_true")
    parser.add_argument("--from-scratch", type=float, help="seconds a from-scratch run of the default zoo took")
    parser.add_argument("--out", type=Path, default=REPO / "reports/benchmarks/pipeline_timing.json")
    args = parser.parse_args()

    cpu = fingerprint()["cpu"]
    result: dict = {"cpu": cpu["model"], "cores": cpu["cores"], "date": time.strftime("%Y-%m-%d")}
    timed(REPRO)  # settle: the first run may still have work to do
    runs = [timed(REPRO) for _ in range(args.noop_runs)]
    result |= {"noop_s_median": statistics.median(runs), "noop_s_max": max(runs), "noop_runs": len(runs)}
    result["noop_goal_s"] = 3
    if args.from_scratch:
        result |= {"from_scratch_s": args.from_scratch, "from_scratch_goal_s": 720}
    if args.byom:
        result |= byom_timing()
    write_json(args.out, result)
    lines = [f"no-op dvc repro: median {result['noop_s_median']:.2f} s, max {result['noop_s_max']:.2f} s "
             f"over {len(runs)} runs (goal <= 3 s)"]  # fmt: skip
    if args.from_scratch:
        lines.append(f"default zoo from scratch: {args.from_scratch / 60:.1f} min (goal <= 12 min)")
    if args.byom:
        lines.append(
            f"my_mlp from params to a choice: {result['byom_s']:.0f} s (goal <= 90 s) over {result['byom_stages']} "
            f"stages: bench processes {result['byom_bench_process_s']:.0f} s, build passes "
            f"{result['byom_build_pass_s']:.0f} s, the rest (process starts, imports, DVC) "
            f"{result['byom_other_s']:.0f} s"
        )
    print("\n".join(lines))


if __name__ == "__main__":
    main()
