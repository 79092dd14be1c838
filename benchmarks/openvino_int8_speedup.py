"""Goal (issue 3): on a ResNet-50-class network, batch 1, threads = cores, `openvino_int8` p50 is at
most 0.55x `onnx_fp32` p50. Both variants are built by the pipeline's own code in a scratch project
and measured by the pipeline's harness, each round in a fresh process, alternating (ABAB...) so that
drift in the machine's state hits both alike. Nothing else may run meanwhile.

    python -m benchmarks.openvino_int8_speedup [--model resnet50] [--rounds 3]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
from pathlib import Path

from benchmarks.scratch import latency_in_fresh_process, scratch_project
from pipeline.core.files import write_json
from pipeline.machine.fingerprint import fingerprint

FAST_EVAL = {"generated_samples": 64}  # eval and calibration inputs: the goal is speed, keep them few


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--baseline", default="onnx_fp32")
    parser.add_argument("--candidate", default="openvino_int8")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--goal", type=float, default=0.55)
    parser.add_argument("--out", type=Path, default=Path("reports/benchmarks/openvino_int8_speedup.json"))
    args = parser.parse_args()

    root = scratch_project(args.model, [args.baseline, args.candidate], {"export": FAST_EVAL})
    try:
        p50: dict[str, list[float]] = {args.baseline: [], args.candidate: []}
        precision = ""
        for _ in range(args.rounds):
            for variant in p50:
                result = latency_in_fresh_process(root, args.model, variant)
                p50[variant].append(result["latency_ms"]["p50"])
                precision = result["runtime"].get("inference_precision", precision)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    base, cand = statistics.median(p50[args.baseline]), statistics.median(p50[args.candidate])
    cpu = fingerprint()["cpu"]
    result = {
        "model": args.model,
        "batch": 1,
        "threads": cpu["cores"],
        "rounds": args.rounds,
        f"{args.baseline}_p50_ms": base,
        f"{args.candidate}_p50_ms": cand,
        "p50_by_round": {v: {f"r{i}": x for i, x in enumerate(xs)} for v, xs in p50.items()},
        "candidate_inference_precision": precision,
        "ratio": cand / base,
        "goal": f"ratio <= {args.goal}",
        "met": cand / base <= args.goal,
        "machine": f"{cpu['model']}, {cpu['cores']} cores",
    }
    write_json(args.out, result)
    print(
        f"{args.model}, batch 1, {cpu['cores']} threads, median of {args.rounds} alternating rounds: "
        f"{args.baseline} p50 {base:.2f} ms, {args.candidate} p50 {cand:.2f} ms ({precision} for non-INT8 ops): "
        f"ratio {cand / base:.3f} (goal <= {args.goal}: {'met' if result['met'] else 'NOT met'})"
    )


if __name__ == "__main__":
    main()
