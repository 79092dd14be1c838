"""INT8 that holds on real weights (issue 20, item 3): on a pretrained encoder with real text
(default: minilm_l6_pretrained, all-MiniLM-L6-v2 on standard-library sentences), does the INT8
variant the selection would deploy keep a worst-row cosine >= 0.995 to the FP32 source, on the
scoring rows, at <= 0.33x `onnx_fp32`'s batch-1 p50?

Every variant is built by the pipeline's own code in a scratch project (held-out calibration,
validation and scoring rows, as in `dvc repro`: static INT8's sensitivity search and OpenVINO's
accuracy control see only the validation rows), its fidelity taken on the scoring rows, and every
variant that built is timed side by side in one process by the select stage's contest (alternating
blocks, bench threads, machine lock): ratios to onnx_fp32 from one interleaved run. Nothing else may
run meanwhile.

    python -m benchmarks.transformer_int8 [MODEL ...]
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path
from typing import Any

from benchmarks.scratch import entry, scratch_project
from pipeline import runtimes
from pipeline.build.stage import build_variant
from pipeline.core import layout
from pipeline.core.config import load_params
from pipeline.core.data import DataSet, run_batched
from pipeline.core.evaluate import fidelity_block
from pipeline.core.files import write_json
from pipeline.core.isolate import call
from pipeline.core.records import Measured
from pipeline.decide.contest import measure_contenders
from pipeline.machine.fingerprint import fingerprint

BASELINE = "onnx_fp32"
INT8 = ["onnx_int8_dynamic", "onnx_int8_static", "openvino_int8", "openvino_int8_acc"]
FLOAT = ["onnx_opt", "openvino_fp16"]  # candidates the selection weighs against the INT8 ones


def fidelity_of(root: str, model: str, variant: str) -> dict[str, Any]:
    """Fidelity of every output on the scoring rows (in a process of its own)."""
    path, build = entry(Path(root), model, variant)
    session = runtimes.load(build["runtime"], path, 1, build["runtime_config"])
    reference = DataSet.load(layout.source_dir(model, Path(root)) / layout.REFERENCE)
    outputs = run_batched(session.run, reference.inputs, 32)
    return {"fidelity": fidelity_block(reference.outputs, outputs, None), "runtime": session.details()}


def measure_model(model: str) -> dict[str, Any]:
    root = scratch_project(model, [])
    try:
        params = load_params(root / "params.yaml")
        rows: dict[str, dict[str, Any]] = {}
        for variant in [BASELINE, *FLOAT, *INT8]:
            info = build_variant(model, variant, params, root)
            rows[variant] = {"status": info["status"], "reason": info["reason"], "build": info.get("build", {})}
        ok = [v for v, r in rows.items() if r["status"] == "ok"]
        for variant in ok:
            found = call("benchmarks.transformer_int8:fidelity_of", {"root": str(root), "model": model,
                                                                    "variant": variant}, timeout=1800)  # fmt: skip
            rows[variant] |= {
                "cosine_min": Measured(fidelity=found["fidelity"]).worst_cosine,
                "fidelity": found["fidelity"],
            }
            rows[variant]["precision"] = found["runtime"].get("inference_precision", "")
        race = measure_contenders(model, ok, params, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    to_leader = {v: race["ratio_to_leader"].get(v, {"ratio": 1.0})["ratio"] for v in ok}  # the leader: 1
    base = to_leader[BASELINE] if BASELINE in ok else None
    for variant in ok:
        rows[variant] |= {
            "p50_ms": race["latency_ms"][variant],
            "ratio": to_leader[variant] / base if base else None,
        }
    return {"variants": rows, "how": race["how"]}


def goals(rows: dict[str, dict[str, Any]], min_cosine: float, max_ratio: float) -> dict[str, Any]:
    """The INT8 variant the selection would deploy (fastest INT8 within min_cosine) and the goal."""
    within = {v: r for v, r in rows.items() if r.get("ratio") is not None and r["cosine_min"] >= min_cosine}
    deployed = min((v for v in INT8 if v in within), key=lambda v: within[v]["ratio"], default=None)
    return {
        "deployed_int8": deployed,
        "deployed_ratio": within[deployed]["ratio"] if deployed else None,
        "deployed_cosine_min": within[deployed]["cosine_min"] if deployed else None,
        "goal_met": deployed is not None and within[deployed]["ratio"] <= max_ratio,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=["minilm_l6_pretrained"])
    parser.add_argument("--min-cosine", type=float, default=0.995)
    parser.add_argument("--max-ratio", type=float, default=0.33)
    parser.add_argument("--out", type=Path, default=Path("reports/benchmarks/transformer_int8.json"))
    args = parser.parse_args()
    cpu = fingerprint()["cpu"]
    report: dict[str, Any] = {"machine": f"{cpu['model']}, {cpu['cores']} cores", "batch": 1, "threads": cpu["cores"],
                              "min_cosine": args.min_cosine, "max_ratio": args.max_ratio, "models": {}}  # fmt: skip
    for model in args.models:
        measured = measure_model(model)
        rows = measured["variants"]
        verdict = goals(rows, args.min_cosine, args.max_ratio)
        report["models"][model] = measured | verdict
        print(f"\n{model} (batch 1, {cpu['cores']} threads, {cpu['model']}; worst-row cosine on the scoring rows)")
        print(f"  timing: {measured['how']}")
        print(f"{'variant':20} {'recipe / precision':48} {'worst cos':>9} {'p50 ms':>8} {'vs fp32':>8}")
        for variant, row in rows.items():
            if row["status"] != "ok":
                print(f"{variant:20} {row['status']}: {row['reason'][:100]}")
                continue
            how = row["build"].get("recipe") or row["build"].get("model_type", "")
            kept = row["build"].get("sensitivity", {}).get("kept")
            how = f"{how}, {kept} kept float" if kept else how
            how = f"{how} ({row['precision']})" if row["precision"] else how
            print(f"{variant:20} {how[:48]:48} {row['cosine_min']:9.5f} {row['p50_ms']:8.3f} {row['ratio']:7.3f}x")
        ratio = f"{verdict['deployed_ratio']:.3f}x" if verdict["deployed_ratio"] else "-"
        print(
            f"goal: the deployed INT8 keeps worst-row cosine >= {args.min_cosine} at <= {args.max_ratio}x {BASELINE}: "
            f"{'met' if verdict['goal_met'] else 'NOT met'} ({verdict['deployed_int8']}, {ratio})"
        )
    write_json(args.out, report)


if __name__ == "__main__":
    main()
