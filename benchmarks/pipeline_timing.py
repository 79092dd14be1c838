"""Pipeline timing: the wall clock a user waits, from the real commands (issue 31's goals).

- `resnet50_to_choice_s` (goal <= 120 s): a foreign ResNet-50 ONNX file (onnx's light_resnet50 with
  seeded random weights: batch fixed to 1, input `gpu_0/data_0`, opset 9) brought the documented way
  into a copy of the project: `python -m pipeline add resnet50_onnx FILE`, `models: [resnet50_onnx]`,
  `python -m pipeline stages --write` and `dvc repro`, until reports/selection/ holds its choice;
- `my_mlp_to_choice_s` (goal <= 45 s): the README's bring-your-own example (a 32-64-4 PyTorch MLP),
  its hand-written catalog entry, the same way;
- `noop_s_median` (goal <= 3 s): a no-op `dvc repro` in this repository, median of --noop-runs;
- `from_scratch_s` (goal <= 8 min) and `ci_s` (goal <= 12 min): timed elsewhere and passed in
  (`time dvc repro` on a fresh clone; `time .ci/run` on a fresh clone).

Each model run says where its time went: the build passes (build.json), the bench processes and their
phases (details phase_s), the export, the select stage's side-by-side contest, and the rest (Python
and DVC start-up per stage, env probe, plan, report).

    python -m benchmarks.pipeline_timing [--noop-runs 5] [--models [--only NAME] [--keep]] [--from-scratch S]
                                         [--ci S]

Nothing else may run meanwhile (a second process on 2 cores changes every figure).

`--smoke`: a 16 -> 4 MatMul ONNX file (benchmarks.smoke.tiny_onnx) through `add` to a choice, the way
the ResNet-50 file goes, with two variants (`onnx_fp32`, `onnx_opt`) and a bench and contest of a
fraction of a second (benchmarks.smoke.SMOKE_SETTINGS), no no-op runs: the script's whole path with a
real `dvc repro`, to check that it runs (tests/test_benchmarks.py); its figures mean nothing.
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
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from benchmarks.smoke import SMOKE_SETTINGS, merged, tiny_onnx, written_to
from pipeline.core import layout
from pipeline.core.files import read_json, write_json
from pipeline.machine.fingerprint import fingerprint
from pipeline.machine.naming import hardware_name

REPO = Path(__file__).resolve().parents[1]
ENV = os.environ | {"PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "DVC_NO_ANALYTICS": "1"}
GOALS = {"resnet50_to_choice_s": 120, "my_mlp_to_choice_s": 45, "noop_s_median": 3, "from_scratch_s": 480,
         "ci_s": 720}  # fmt: skip
# what was measured with each figure, carried with it
COMPANIONS = {"noop_s_median": ["noop_s_max", "noop_runs"], "resnet50_to_choice_s": ["resnet50_breakdown"],
              "my_mlp_to_choice_s": ["my_mlp_breakdown"]}  # fmt: skip
KEEP = ["pipeline", "stages", "models/__init__.py", "models/common", "params.yaml", "pyproject.toml", "dvc.yaml",
        "fingerprint/dvc.yaml", "variants", ".dvc/plots", ".dvc/config", ".dvcignore"]  # fmt: skip
MLP = textwrap.dedent(
    """
    from torch import nn


    def build() -> nn.Module:
        return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
    """
)


def timed(cmd: list[str], cwd: Path = REPO, env: dict[str, str] = ENV) -> float:
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed in {cwd}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return time.perf_counter() - start


def scratch_project() -> Path:
    """A copy of the project's code and stage files, no lock, no outputs: what a clone brings."""
    root = Path(tempfile.mkdtemp(prefix="timing-")) / "project"
    for name in KEEP:
        source, target = REPO / name, root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "dvc.lock"))
        elif source.exists():
            shutil.copy(source, target)
    return root


def resnet50_onnx(root: Path) -> Path:
    """onnx's light_resnet50 (weights replaced by ConstantOfShape nodes) with seeded random weights as
    initializers: a stand-in for a ResNet-50 file exported elsewhere, written outside the project
    at `root`. Returns its path (for `add`)."""
    import onnx
    from onnx import numpy_helper

    light = Path(onnx.__file__).parent / "backend/test/data/light/light_resnet50.onnx"
    model = onnx.load(light)
    rng = np.random.default_rng(0)
    shapes = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    weights, kept, consumed = [], [], set()
    for node in model.graph.node:
        if node.op_type != "ConstantOfShape":
            kept.append(node)
            continue
        consumed.add(node.input[0])
        shape = tuple(int(d) for d in shapes[node.input[0]])
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        values = rng.standard_normal(shape).astype(np.float32) * np.float32(np.sqrt(1 / fan_in))
        name = node.output[0]
        if name.endswith(("_bn_s_0", "_bn_riv_0")):  # BatchNorm scale and variance: positive, near 1
            values = 1 + np.abs(values) * np.float32(0.1)
        elif name.endswith(("_bn_b_0", "_bn_rm_0")):
            values *= np.float32(0.1)
        weights.append(numpy_helper.from_array(values, node.output[0]))
    others = [t for t in model.graph.initializer if t.name not in consumed]  # BatchNorm statistics and the like
    del model.graph.node[:]
    model.graph.node.extend(kept)
    del model.graph.initializer[:]
    model.graph.initializer.extend([*others, *weights])
    kept_inputs = [i for i in model.graph.input if i.name not in consumed]
    del model.graph.input[:]  # IR 3, as its exporter wrote it: every initializer is also a graph input
    model.graph.input.extend(kept_inputs)
    listed = (onnx.helper.make_tensor_value_info(w.name, onnx.TensorProto.FLOAT, w.dims) for w in weights)
    model.graph.input.extend(listed)
    onnx.checker.check_model(model)
    folder = root.parent / "elsewhere"
    folder.mkdir(parents=True)
    onnx.save(model, folder / "model.onnx")
    return folder / "model.onnx"


def my_mlp(root: Path) -> dict[str, Any]:
    """The README's my_mlp: code, a state_dict and labelled eval rows in the project at `root`.
    Returns its catalog entry."""
    import torch

    folder = root / "models" / "my_mlp"
    folder.mkdir(parents=True)
    (folder / "net.py").write_text(MLP)
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    torch.save(module.state_dict(), folder / "weights.pt")
    x = np.random.default_rng(0).standard_normal((512, 32)).astype(np.float32)
    np.savez(folder / "eval.npz", x=x, labels=module(torch.from_numpy(x)).argmax(1).detach().numpy())
    return {"source": "torch", "factory": "models.my_mlp.net:build", "file": "weights.pt",
            "inputs": {"x": {"shape": ["batch", 32], "dtype": "float32"}}, "outputs": ["scores"],
            "eval_data": "eval.npz", "metric": "accuracy"}  # fmt: skip


def to_choice(name: str, make: Any, keep: bool = False, smoke: bool = False) -> dict[str, Any]:
    """Add model `name` to a scratch project as a user does, then time params -> choice: an ONNX file
    with `python -m pipeline add` (make returns its path), a code model by its hand-written entry and
    `stages --write` (make returns the entry). `models` then lists it alone; `smoke`: two variants,
    SMOKE_SETTINGS."""
    root = scratch_project()
    # what a new user meets: TorchInductor's compile cache starts empty (a warm one took my_mlp's
    # torch_compile build from 16.6 s to 7.0 s)
    env = ENV | {"TORCHINDUCTOR_CACHE_DIR": str(root.parent / "torchinductor")}
    try:
        made = make(root)
        for cmd in (["git", "init", "-q"], ["dvc", "init", "-q", "--force"]):
            timed(cmd, root)
        params = yaml.safe_load((root / "params.yaml").read_text())
        start = time.perf_counter()
        if isinstance(made, Path):
            add_s = timed([sys.executable, "-m", "pipeline", "add", name, str(made)], root, env)
            params = yaml.safe_load((root / "params.yaml").read_text())
        else:
            add_s, params["catalog"][name] = 0.0, made
        params["models"] = [name]
        if smoke:
            params = merged(params, SMOKE_SETTINGS)
            params["variants"] = {k: v for k, v in params["variants"].items() if k in ("onnx_fp32", "onnx_opt")}
            params["machine_variants"], params["catalog"] = {}, {name: params["catalog"][name]}
        (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
        write_s = add_s + timed([sys.executable, "-m", "pipeline", "stages", "--write"], root, env)
        for cmd in (["git", "add", "-A"], ["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", name]):
            timed(cmd, root)
        repro_s = timed(["dvc", "repro"], root, env)
        total = time.perf_counter() - start
        return {"total_s": total, "add_and_stages_write_s": write_s, **breakdown(name, root, repro_s)}
    finally:
        if keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root.parent, ignore_errors=True)


def deployed_distance(model: str, root: Path) -> dict[str, Any] | None:
    """The deployed variant's distance from this machine's limit, as its manifest says it (pipeline.decide.roofline)."""
    distance = read_json(layout.deploy_dir(model, root) / layout.MANIFEST).get("roofline")
    keys = ("of_bound", "bound_by", "of_bound_peak", "bound_by_peak", "roof_precision", "macs", "status", "reason")
    return {k: distance[k] for k in keys if k in distance} if distance else None


def breakdown(model: str, root: Path, repro_s: float) -> dict[str, Any]:
    """Where `dvc repro`'s time went for `model`, from what the stages recorded."""
    details = {p.stem: read_json(p) for p in (layout.details_dir(root) / model).glob("*.json")}
    builds = [read_json(path) for path in (root / "artifacts" / model).glob(f"*/{layout.BUILD_INFO}")]
    export = read_json(root / "reports" / "export" / f"{model}.json")
    manifest = read_json(layout.deploy_dir(model, root) / layout.MANIFEST)
    contest = (manifest["selection"].get("contest") or {}).get("seconds", 0.0)
    phases: Counter[str] = Counter()
    for record in details.values():
        phases.update(record.get("phase_s") or {})
    parts = {
        "export_stage_s": export.get("export_stage_s", 0.0),  # converter, reference outputs, checks
        "build_pass_s": sum(((b.get("build") or {}).get("seconds") or 0.0) for b in builds),
        "bench_process_s": sum(r.get("process_s") or 0.0 for r in details.values()),
        "contest_s": contest,
    }
    choice = read_json(layout.selection_file(model, root))
    stages = subprocess.run(["dvc", "stage", "list", "--all", "--name-only"], cwd=root, capture_output=True,
                            text=True, env=ENV).stdout.split()  # fmt: skip
    return {
        "repro_s": repro_s,
        **parts,
        "other_s": repro_s - sum(parts.values()),
        "bench_phase_s": {k: round(v, 1) for k, v in phases.most_common()},
        "stages": len(stages),
        "variants_measured": sum(r.get("status") == "ok" for r in details.values()),
        "variants_not_needed": sorted(v for v, r in details.items() if r.get("kind") == "skipped-not-needed"),
        "chosen": choice["chosen"],
        "why": choice["why"][:300],
        "distance": deployed_distance(model, root),
        # why each other variant lost, and each build's seconds: what a changed choice or a slow build traces to
        "rejected": {variant: reason[:200] for variant, reason in choice["rejected"].items()},
        "build_s": {b["variant"]: round(((b.get("build") or {}).get("seconds") or 0.0), 1) for b in builds},
        "bench_s": {variant: round(r.get("process_s") or 0.0, 1) for variant, r in sorted(details.items())},
    }


def carry_over(result: dict[str, Any], previous: Path) -> None:
    """Keep the figures this run did not take from the previous file, each with the date it was taken
    (measured_on), so a partial rerun (say --ci alone) never drops or re-dates the others: only from the
    same machine (a file of another, or one that names none, is left behind: figures of two CPUs never mix)."""
    if not previous.is_file():
        return
    before = read_json(previous)
    if before.get("machine") != result["machine"]:
        return
    dates = before.get("measured_on") or {}
    for key in GOALS:
        if key not in result and key in before:
            result[key] = before[key]
            result["measured_on"][key] = dates.get(key, before.get("date"))
            result |= {companion: before[companion] for companion in COMPANIONS.get(key, []) if companion in before}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--noop-runs", type=int, default=5)
    parser.add_argument("--models", action="store_true", help="time the ResNet-50 file and my_mlp to a choice")
    parser.add_argument("--only", choices=["resnet50", "my_mlp"], help="with --models: time this one alone")
    parser.add_argument("--keep", action="store_true", help="leave each scratch project for a look")
    parser.add_argument("--from-scratch", type=float, help="seconds `dvc repro` took on a fresh clone")
    parser.add_argument("--ci", type=float, help="seconds .ci/run took on a fresh clone")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--smoke", action="store_true", help="a tiny ONNX file, two variants: checks that it runs")
    args = parser.parse_args()
    args.out = written_to(args.out, REPO / "reports/benchmarks/pipeline_timing.json", args.smoke)
    models = {"resnet50": ("resnet50_onnx", resnet50_onnx), "my_mlp": ("my_mlp", my_mlp)} if args.models else {}
    if args.smoke:
        args.noop_runs, models = 0, {"tiny_onnx": ("tiny_onnx", lambda root: tiny_onnx(root.parent / "elsewhere"))}

    found = fingerprint()
    result: dict[str, Any] = {"machine": hardware_name(found), "cpu": found.cpu.model,
                              "cores": found.cpu.cores, "date": time.strftime("%Y-%m-%d")}  # fmt: skip
    if args.noop_runs:  # 0: the committed run is another machine's, and settling it would rerun the zoo
        timed(["dvc", "repro"])  # settle: the first run may still have work to do
        runs = [timed(["dvc", "repro"]) for _ in range(args.noop_runs)]
        result |= {"noop_s_median": statistics.median(runs), "noop_s_max": max(runs), "noop_runs": len(runs)}
    for key, (name, make) in models.items():
        if args.only and key != args.only:
            continue
        run = to_choice(name, make, args.keep, args.smoke)
        result[f"{key}_to_choice_s"] = run.pop("total_s")
        result[f"{key}_breakdown"] = run
    if args.from_scratch:
        result["from_scratch_s"] = args.from_scratch
    if args.ci:
        result["ci_s"] = args.ci
    result["measured_on"] = {key: f"{result['date']} on {result['machine']}" for key in GOALS if key in result}
    if not args.smoke:  # a smoke run's file is no record of this machine
        carry_over(result, args.out)
    for key, goal in GOALS.items():
        if key in result:
            result[key.removesuffix("_median").removesuffix("_s") + "_goal_s"] = goal
            result[key.removesuffix("_median").removesuffix("_s") + "_met"] = result[key] <= goal
    write_json(args.out, result)
    for key, goal in GOALS.items():
        if key in result:
            print(f"{key}: {result[key]:.1f} s (goal <= {goal} s: {'met' if result[key] <= goal else 'missed'})")
    if args.smoke:
        print(f"tiny_onnx_to_choice_s: {result['tiny_onnx_to_choice_s']:.1f} s (smoke: no goal)")
    for key in (f"{key}_breakdown" for key in models):
        if key in result:
            parts = result[key]
            print(f"  {key.partition('_breakdown')[0]}: {parts['stages']} stages, "
                  f"export {parts['export_stage_s']:.0f} s, "
                  f"builds {parts['build_pass_s']:.0f} s, bench {parts['bench_process_s']:.0f} s "
                  f"({', '.join(f'{k} {v:g}' for k, v in parts['bench_phase_s'].items())}), contest "
                  f"{parts['contest_s']:.0f} s, other {parts['other_s']:.0f} s; chose {parts['chosen']}")  # fmt: skip


if __name__ == "__main__":
    main()
