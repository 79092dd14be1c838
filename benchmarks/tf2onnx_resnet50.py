"""Goal (issue 4): tf2onnx converts Keras ResNet50 (weights=None, 224x224) and the ONNX model matches
Keras within 1e-4 max abs diff on fixed inputs. Runs the pipeline's export stage (tf2onnx, then the
checker and the parity check on seeded inputs) in a scratch project and reads its report.

    python -m benchmarks.tf2onnx_resnet50 [--samples 16]
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from benchmarks.scratch import scratch_project
from pipeline.core import layout
from pipeline.core.files import read_json, write_json

GOAL_MAX_ABS_DIFF = 1e-4


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="keras_resnet50")
    parser.add_argument("--samples", type=int, default=16, help="fixed (seeded) inputs compared")
    parser.add_argument("--out", type=Path, default=Path("reports/benchmarks/tf2onnx_resnet50.json"))
    args = parser.parse_args()
    root = scratch_project(args.model, [], {"export": {"generated_samples": args.samples}})
    try:
        report = read_json(layout.export_report(args.model, root))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    met = report["status"] == "ok" and report["parity_max_abs_diff"] <= GOAL_MAX_ABS_DIFF
    result = {k: report[k] for k in ("status", "exporter", "export_s", "opset", "nodes", "parity_max_abs_diff")}
    write_json(
        args.out, result | {"samples": args.samples, "goal": f"max abs diff <= {GOAL_MAX_ABS_DIFF:g}", "met": met}
    )
    print(
        f"{args.model}: {report['exporter']} in {report['export_s']:.1f} s, opset {report['opset']}, "
        f"{report['nodes']} nodes; ONNX Runtime vs Keras on {args.samples} seeded inputs: max abs diff "
        f"{report['parity_max_abs_diff']:.2e} (goal <= {GOAL_MAX_ABS_DIFF:g}: {'met' if met else 'NOT met'})"
    )


if __name__ == "__main__":
    main()
