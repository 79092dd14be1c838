"""Goals (issue 9), on the test transformer and any model named on the command line, batch 1,
threads = cores: some INT8 variant keeps `cosine_mean >= 0.99` against the FP32 source at a p50 of at
most 0.5x `onnx_fp32`; the artifact the selection rule picks (fastest within `min_cosine`) is at most
0.45x `onnx_fp32`.

Every variant is built by the pipeline's own code in a scratch project (held-out calibration,
validation and scoring rows, as in `dvc repro`), its fidelity taken on the scoring rows, and its
latency measured by the pipeline's harness, each round in a fresh process, alternating between
variants so that drift hits all alike; ratios are medians of one run's rounds. Nothing else may run
meanwhile.

    python -m benchmarks.transformer_int8 [MODEL ...] [--rounds 3]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
from pathlib import Path
from typing import Any

from benchmarks.scratch import entry, latency_in_fresh_process, scratch_project
from pipeline import runtimes
from pipeline.build.stage import build_variant
from pipeline.core import layout
from pipeline.core.config import load_params
from pipeline.core.data import DataSet, run_batched
from pipeline.core.evaluate import fidelity_block, worst_row_cosine
from pipeline.core.files import write_json
from pipeline.core.isolate import call
from pipeline.machine.fingerprint import fingerprint

BASELINE = "onnx_fp32"
INT8 = ["onnx_int8_dynamic", "onnx_int8_static", "openvino_int8", "openvino_int8_acc"]
FLOAT = ["onnx_opt", "openvino_fp16"]  # candidates the selection weighs against the INT8 ones
FAST_EVAL = {"generated_samples": 128}


def fidelity_of(root: str, model: str, variant: str) -> dict[str, Any]:
    """Fidelity of every output on the scoring rows (in a process of its own)."""
    path, build = entry(Path(root), model, variant)
    session = runtimes.load(build["runtime"], path, 1, build["runtime_config"])
    reference = DataSet.load(layout.source_dir(model, Path(root)) / layout.REFERENCE)
    outputs = run_batched(session.run, reference.inputs, 32)
    return {"fidelity": fidelity_block(reference.outputs, outputs, None), "runtime": session.details()}


def measure_model(model: str, rounds: int) -> dict[str, Any]:
    root = scratch_project(model, [], {"export": FAST_EVAL})
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
            rows[variant] |= {"cosine_min": worst_row_cosine(found["fidelity"]), "fidelity": found["fidelity"]}
            rows[variant]["precision"] = found["runtime"].get("inference_precision", "")
            rows[variant]["p50_by_round"] = []
        for _ in range(rounds):
            for variant in ok:
                result = latency_in_fresh_process(root, model, variant)
                rows[variant]["p50_by_round"].append(result["latency_ms"]["p50"])
    finally:
        shutil.rmtree(root, ignore_errors=True)
    base = statistics.median(rows[BASELINE]["p50_by_round"]) if BASELINE in ok else None
    for variant in ok:
        p50 = statistics.median(rows[variant]["p50_by_round"])
        rows[variant] |= {"p50_ms": p50, "ratio": p50 / base if base else None}
    return rows


def goals(rows: dict[str, dict[str, Any]], min_cosine: float) -> dict[str, Any]:
    """The two goals, judged on one run's figures."""
    measured = {v: r for v, r in rows.items() if r.get("ratio") is not None}
    within = {v: r for v, r in measured.items() if r["cosine_mean"] >= min_cosine}
    int8 = [v for v in INT8 if v in within]
    best_int8 = min(int8, key=lambda v: within[v]["ratio"], default=None)
    chosen = min(within, key=lambda v: within[v]["ratio"], default=None)
    return {
        "best_int8": best_int8,
        "int8_goal_met": best_int8 is not None and within[best_int8]["ratio"] <= 0.5,
        "chosen": chosen,
        "chosen_ratio": within[chosen]["ratio"] if chosen else None,
        "chosen_goal_met": chosen is not None and within[chosen]["ratio"] <= 0.45,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=["minilm_l6"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("reports/benchmarks/transformer_int8.json"))
    args = parser.parse_args()
    min_cosine = load_params(Path("params.yaml")).select.constraints.min_cosine or 0.99
    cpu = fingerprint()["cpu"]
    report: dict[str, Any] = {
        "machine": f"{cpu['model']}, {cpu['cores']} cores",
        "batch": 1,
        "threads": cpu["cores"],
        "rounds": args.rounds,
        "min_cosine": min_cosine,
        "models": {},
    }
    for model in args.models:
        rows = measure_model(model, args.rounds)
        verdict = goals(rows, min_cosine)
        report["models"][model] = {"variants": rows, **verdict}
        rounds = f"median of {args.rounds} alternating rounds"
        print(f"\n{model} (batch 1, {cpu['cores']} threads, {rounds}, {cpu['model']})")
        print(f"{'variant':20} {'recipe / precision':48} {'cosine_mean':>11} {'p50 ms':>8} {'vs fp32':>8}")
        for variant, row in rows.items():
            if row["status"] != "ok":
                print(f"{variant:20} {row['status']}: {row['reason'][:100]}")
                continue
            how = row["build"].get("recipe") or row["build"].get("model_type", "")
            how = f"{how} ({row['precision']})" if row["precision"] else how
            print(f"{variant:20} {how[:48]:48} {row['cosine_mean']:11.5f} {row['p50_ms']:8.3f} {row['ratio']:7.3f}x")
        print(
            f"goal 1, an INT8 variant with cosine >= {min_cosine} at <= 0.5x {BASELINE}: "
            f"{'met' if verdict['int8_goal_met'] else 'NOT met'} (best: {verdict['best_int8']})"
        )
        ratio = f"{verdict['chosen_ratio']:.3f}x" if verdict["chosen_ratio"] else "-"
        print(
            f"goal 2, the fastest variant within min_cosine at <= 0.45x {BASELINE}: "
            f"{'met' if verdict['chosen_goal_met'] else 'NOT met'} ({verdict['chosen']}, {ratio})"
        )
    write_json(args.out, report)


if __name__ == "__main__":
    main()
