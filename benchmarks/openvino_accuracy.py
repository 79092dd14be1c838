"""Goals (issue 3) read from the pipeline's own metrics (run `dvc repro` first): on digits_cnn,
`openvino_int8` loses at most 1 accuracy point (absolute) against the FP32 source, and
`openvino_int8_acc` stays within its `max_drop` (params.yaml). Both are measured on the eval split
by the bench stage; accuracy control also tuned on that split, which docs/variants.md points out.

    python -m benchmarks.openvino_accuracy [--model digits_cnn]
"""

from __future__ import annotations

import argparse

from pipeline.core import layout
from pipeline.core.config import load_params
from pipeline.core.files import read_json


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="digits_cnn")
    args = parser.parse_args()
    max_drop = load_params().variant_params("openvino_int8_acc").get("max_drop", 0.01)
    ok = True
    for variant, limit in (("openvino_int8", 0.01), ("openvino_int8_acc", max_drop)):
        metrics = read_json(layout.metrics_file(args.model, variant))
        accuracy = metrics["accuracy"]
        met = metrics["status"] == "ok" and -accuracy["delta"] <= limit
        ok &= met
        print(
            f"{args.model}/{variant}: {accuracy['metric']} {accuracy['value']:.4f}, delta {accuracy['delta']:+.4f} "
            f"vs FP32 source (goal: drop <= {limit:g}: {'met' if met else 'NOT met'})"
        )
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
