"""Goal (issue 4): `tf_xla` vs `tf_graph` and `jax_xla` vs `jax_jit`, steady-state batch-1 p50 ratio,
with load time (which includes XLA compilation for the XLA variants) reported separately.

Each pair is built in a scratch project by the pipeline's own code and measured by its harness,
each round in a fresh process, alternating so that drift hits both alike. Zoo models must have been
trained (`dvc repro`); Keras ResNet50 is built with weights=None.

    python -m benchmarks.xla_ratios [--rounds 3] [--with-resnet50]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
from pathlib import Path

from benchmarks.scratch import latency_in_fresh_process, scratch_project
from pipeline.core.files import write_json
from pipeline.machine.fingerprint import fingerprint

PAIRS = {"digits_keras": ("tf_graph", "tf_xla"), "digits_jax": ("jax_jit", "jax_xla")}
FEW_SAMPLES = {"export": {"generated_samples": 16}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--with-resnet50", action="store_true", help="also Keras ResNet50 (tf_graph vs tf_xla)")
    parser.add_argument("--out", type=Path, default=Path("reports/benchmarks/xla_ratios.json"))
    args = parser.parse_args()
    pairs = PAIRS | ({"keras_resnet50": ("tf_graph", "tf_xla")} if args.with_resnet50 else {})
    rows = {}
    for model, (native, xla) in pairs.items():
        root = scratch_project(model, [native, xla], FEW_SAMPLES)
        try:
            runs: dict[str, list[dict]] = {native: [], xla: []}
            for _ in range(args.rounds):
                for variant in runs:
                    runs[variant].append(latency_in_fresh_process(root, model, variant))
        finally:
            shutil.rmtree(root, ignore_errors=True)

        def median(variant: str, key: str, runs: dict[str, list[dict]] = runs) -> float:
            return statistics.median(r[key]["p50"] if key == "latency_ms" else r[key] for r in runs[variant])

        rows[model] = {
            "native": native,
            "xla": xla,
            "native_p50_ms": median(native, "latency_ms"),
            "xla_p50_ms": median(xla, "latency_ms"),
            "p50_ratio_xla_over_native": median(xla, "latency_ms") / median(native, "latency_ms"),
            "native_load_ms": median(native, "load_ms"),
            "xla_load_ms": median(xla, "load_ms"),
        }
    cpu = fingerprint()["cpu"]
    write_json(args.out, {"rounds": args.rounds, "batch": 1, "threads": cpu["cores"], "rows": rows})
    header = ("model", "pair", "native p50", "xla p50", "ratio", "native load", "xla load")
    lines = ["{:<16} {:<20} {:>11} {:>10} {:>6} {:>12} {:>10}".format(*header)]
    for model, r in rows.items():
        lines.append(
            f"{model:<16} {r['xla'] + ' / ' + r['native']:<20} {r['native_p50_ms']:>8.4f} ms "
            f"{r['xla_p50_ms']:>7.4f} ms {r['p50_ratio_xla_over_native']:>6.2f} "
            f"{r['native_load_ms']:>9.0f} ms {r['xla_load_ms']:>7.0f} ms"
        )
    lines.append(f"batch 1, {cpu['cores']} threads, medians of {args.rounds} alternating rounds in fresh processes; "
                 "load includes XLA compilation (batch-1 shape) for the XLA variants and jax_jit")  # fmt: skip
    print("\n".join(lines))
    args.out.with_suffix(".txt").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
