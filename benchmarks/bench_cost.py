"""What the benchmark costs, from the figures of one run: bench process seconds per model and phase,
and how tight the intervals they bought are; against another revision's run when asked.

Reads reports/details (every bench stage records `process_s`, its fresh process's wall time, and
`phase_s`) and deploy/<model>/manifest.json (the select step's side-by-side re-measure). Goals of
issue 19: the default zoo's bench processes at most 165 s in total, with equal or tighter intervals.
`--base REV` reads the same files at a git revision (measured on the same CPU model only: the
script refuses another).

    python -m benchmarks.bench_cost [--base REV]

`--smoke`: the first model of params.yaml alone, from the committed figures (tests/test_benchmarks.py).
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path
from statistics import median
from typing import Any

from benchmarks.smoke import written_to
from pipeline.core.config import PARAMS_FILE, load_params
from pipeline.core.files import write_json

REPO = Path(__file__).resolve().parents[1]
GOAL_S = 165.0


def _git_json(rev: str, path: str) -> Any:
    shown = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=REPO, capture_output=True, text=True)
    return json.loads(shown.stdout) if shown.returncode == 0 else None


def details(models: list[str], rev: str | None) -> dict[str, dict[str, dict]]:
    """model -> variant -> details record, from the workspace or from `rev`."""
    found: dict[str, dict[str, dict]] = {}
    for model in models:
        if rev is None:
            files = sorted((REPO / "reports/details" / model).glob("*.json"))
            found[model] = {p.stem: json.loads(p.read_text()) for p in files}
        else:
            listed = subprocess.run(
                ["git", "ls-tree", "--name-only", f"{rev}:reports/details/{model}"],
                cwd=REPO,
                capture_output=True,
                text=True,
            ).stdout.split()
            found[model] = {Path(n).stem: _git_json(rev, f"reports/details/{model}/{n}") for n in listed}
    return found


def cost(records: dict[str, dict[str, dict]]) -> dict[str, Any]:
    measured = [d for variants in records.values() for d in variants.values() if d and d.get("status") == "ok"]
    phases: dict[str, float] = {}
    for d in measured:
        for phase, seconds in (d.get("phase_s") or {}).items():
            phases[phase] = phases.get(phase, 0.0) + seconds
    widths = [d["p50_ci_pct"] for d in measured if d.get("p50_ci_pct") is not None]
    old_spread = [d["noise_pct"] for d in measured if d.get("noise_pct") is not None]  # before issue 19
    return {
        "variants": len(measured),
        "process_s": round(sum(d.get("process_s", 0.0) for d in measured), 1),
        "by_model_s": {m: round(sum(d.get("process_s", 0.0) for d in v.values() if d), 1) for m, v in records.items()},
        "phase_s": {k: round(v, 1) for k, v in sorted(phases.items(), key=lambda kv: -kv[1])},
        "latency_calls": sum(d["latency_ms"]["n"] for d in measured),
        "p50_ci_pct_median": round(median(widths), 2) if widths else None,
        "p50_ci_pct_max": round(max(widths), 2) if widths else None,
        "noisy": sum(bool(d.get("noisy")) for d in measured),
        "segment_spread_pct_median": round(median(old_spread), 1) if old_spread else None,
        "cpu": next((d.get("machine") for d in measured), None),
    }


def contests(models: list[str]) -> dict[str, Any]:
    out = {}
    for model in models:
        path = REPO / "deploy" / model / "manifest.json"
        contest = json.loads(path.read_text())["selection"].get("contest") if path.exists() else None
        out[model] = {"seconds": contest["seconds"], "contenders": len(contest["latency_ms"])} if contest else None
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", help="a git revision whose committed run to compare with")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--smoke", action="store_true", help="the first model alone: checks that it runs")
    args = parser.parse_args()
    args.out = written_to(args.out, REPO / "reports/benchmarks/bench_cost.json", args.smoke)
    models = load_params(REPO / PARAMS_FILE).models[: 1 if args.smoke else None]
    now = cost(details(models, None))
    result: dict[str, Any] = {"goal_process_s": GOAL_S, "now": now, "select_contest": contests(models)}
    print(f"bench processes of {now['variants']} variants: {now['process_s']:.0f} s (goal {GOAL_S:.0f} s)")
    print(f"  by phase: {now['phase_s']}")
    print(
        f"  p50 95% interval: median ±{now['p50_ci_pct_median']}%, max ±{now['p50_ci_pct_max']}%, {now['noisy']} noisy"
    )
    spent = sum(c["seconds"] for c in result["select_contest"].values() if c)
    print(f"  select re-measures: {spent:.0f} s over {sum(bool(c) for c in result['select_contest'].values())} models")
    if args.base:
        base = cost(details(models, args.base))
        if base["cpu"] != now["cpu"]:
            raise SystemExit(f"{args.base} was measured on {base['cpu']}, this run on {now['cpu']}: not comparable")
        result["base"] = base | {"rev": args.base}
        print(
            f"{args.base}: {base['process_s']:.0f} s for {base['variants']} variants -> now "
            f"{now['process_s'] / base['process_s']:.2f}x the time; its segment spread median "
            f"{base['segment_spread_pct_median']}% (the old 'noise', not an interval)"
        )
    write_json(args.out, result)


if __name__ == "__main__":
    main()
