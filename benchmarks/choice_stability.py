"""Does the deploy choice survive a rerun? Every model's select-step decision, taken again 3 times.

Each run is a fresh process doing what the select stage does, on the stored figures of this
project (reports/details): screen, then re-measure the contenders side by side (pipeline.decide.
contest). A model is stable when every run chose the same variant, or when the runs that differ
each declared a tie that holds the others' choices (a declared tie counts as stable: its tie-break
is a documented order, not a timing). Prints one line per run and a verdict; writes
reports/benchmarks/choice_stability.json. Run it with nothing else on the machine.

    python -m benchmarks.choice_stability [--runs 3] [MODEL ...]

`--smoke`: 2 runs of the first model on a copy of its committed figures with the re-measure turned off
(no built variants needed; a screen-only decision), to check that the script runs (tests/test_benchmarks.py).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import yaml

from benchmarks.smoke import written_to
from pipeline.core import layout
from pipeline.core.config import PARAMS_FILE, load_params
from pipeline.core.files import write_json
from pipeline.core.isolate import call
from pipeline.machine.fingerprint import fingerprint

REPO = Path(__file__).resolve().parents[1]


def stable(runs: list[dict]) -> bool:
    chosen = {r["chosen"] for r in runs}
    return len(chosen) == 1 or all(chosen <= set(r["tied"]) | {r["chosen"]} for r in runs)


def screen_only_copy(model: str) -> Path:
    """A temporary project holding this one's params (the re-measure off) and `model`'s committed figures."""
    root = Path(tempfile.mkdtemp(prefix="choice-stability-"))
    params = yaml.safe_load((REPO / PARAMS_FILE).read_text())
    params["select"].setdefault("contest", {})["enabled"] = False
    (root / PARAMS_FILE).write_text(yaml.safe_dump(params, sort_keys=False))
    shutil.copytree(layout.details_dir(REPO) / model, layout.details_dir(root) / model)
    return root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--smoke", action="store_true", help="2 screen-only runs of one model: checks that it runs")
    args = parser.parse_args()
    args.out = written_to(args.out, REPO / "reports/benchmarks/choice_stability.json", args.smoke)
    models = args.models or load_params(REPO / PARAMS_FILE).models
    root = REPO
    if args.smoke:
        models, args.runs = models[:1], 2
        root = screen_only_copy(models[0])
    results, flips = {}, 0
    started = time.perf_counter()
    for model in models:
        runs = []
        for i in range(args.runs):
            run = call("pipeline.decide.contest:choose", {"model": model, "root": str(root)}, timeout=1800)
            runs.append(run)
            tie = f" (tie: {', '.join(run['tied'])})" if len(run["tied"]) > 1 else ""
            timed = (
                f"{len(run['contenders'])} re-measured, {run['seconds'] or 0:.1f} s"
                if run["contenders"]
                else "no re-measure"
            )
            print(f"{model:14} run {i + 1}: {run['chosen']}{tie}  [{timed}]", flush=True)
        ok = stable(runs)
        flips += not ok
        results[model] = {"stable": ok, "runs": runs}
        print(f"{model:14} {'stable' if ok else 'FLIPPED'}", flush=True)
    if root != REPO:
        shutil.rmtree(root, ignore_errors=True)
    cpu = fingerprint().cpu
    summary = {
        "flips": flips,
        "models": len(models),
        "runs_per_model": args.runs,
        "seconds": round(time.perf_counter() - started, 1),
        "cpu": f"{cpu.model} ({cpu.cores} cores)",
        "results": results,
    }
    write_json(args.out, summary)
    print(
        f"{flips} flip(s) over {len(models)} models x {args.runs} runs in {summary['seconds']:.0f} s; wrote {args.out}"
    )


if __name__ == "__main__":
    main()
