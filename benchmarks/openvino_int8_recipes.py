"""Which OpenVINO INT8 recipe holds on a model's real weights: NNCF's preset (symmetric
`performance` or `mixed`, asymmetric activations, which NNCF recommends for GELU models) crossed with
SmoothQuant's alpha on MatMuls (-1: off), each built by the pipeline's own `openvino_int8` pass in a
scratch project and judged by its worst-row cosine to the FP32 source on the validation rows (what
a recipe may be chosen on) and, beside it, on the scoring rows (what the selection reads); then every
recipe that built is timed side by side in one process by the select stage's contest (alternating
blocks, bench threads, machine lock), ratios to the fastest. Nothing else may run meanwhile.

    python -m benchmarks.openvino_int8_recipes [MODEL] [--alphas 0.95 0.8 0.5 -1]
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path
from typing import Any

import yaml

from benchmarks.scratch import entry, scratch_project
from pipeline import runtimes
from pipeline.build.stage import build_variant
from pipeline.core import layout
from pipeline.core.config import PARAMS_FILE, load_params
from pipeline.core.data import DataSet, run_batched
from pipeline.core.evaluate import cosine_per_sample
from pipeline.core.files import write_json
from pipeline.core.isolate import call
from pipeline.machine.fingerprint import fingerprint
from pipeline.machine.lock import machine_lock
from pipeline.measure.stage import thread_env

VARIANT = "openvino_int8"


def worst_rows(root: str, model: str) -> dict[str, float]:
    """The built variant's worst-row cosine (over every output) on the validation and scoring rows."""
    path, build = entry(Path(root), model, VARIANT)
    session = runtimes.load(build["runtime"], path, 1, build["runtime_config"])
    found = {}
    for role, name in (("validation", layout.VALIDATION), ("scoring", layout.REFERENCE)):
        rows = DataSet.load(layout.source_dir(model, Path(root)) / name)
        outputs = run_batched(session.run, rows.inputs, 32)
        found[role] = min(float(cosine_per_sample(ref, outputs[n]).min()) for n, ref in rows.outputs.items())
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default="minilm_l6_pretrained")
    parser.add_argument("--presets", nargs="+", default=["performance", "mixed"])
    parser.add_argument("--alphas", nargs="+", type=float, default=[0.95, 0.5, -1.0])
    parser.add_argument("--out", type=Path, default=Path("reports/benchmarks/openvino_int8_recipes.json"))
    args = parser.parse_args()
    root = scratch_project(args.model, [])
    rows: dict[str, dict[str, Any]] = {}  # by recipe name, e.g. mixed_0.95
    folders: dict[str, str] = {}
    try:
        params_file = root / PARAMS_FILE
        print(f"{args.model}: worst-row cosine to FP32 ({VARIANT}, {fingerprint()['cpu']['model']})")
        print(f"{'preset':12} {'alpha':>6} {'validation':>10} {'scoring':>8}")
        for preset in args.presets:
            for alpha in args.alphas:
                raw = yaml.safe_load(params_file.read_text())  # the build runs in a process that reads the file
                overrides = raw["catalog"][args.model].setdefault("overrides", {})
                overrides[VARIANT] = {"preset": preset, "smooth_quant_alpha": alpha}
                params_file.write_text(yaml.safe_dump(raw, sort_keys=False))
                info = build_variant(args.model, VARIANT, load_params(params_file), root)
                name = f"{preset}_{alpha:g}"
                row = rows[name] = {"preset": preset, "smooth_quant_alpha": alpha, "status": info["status"]}
                if info["status"] == "ok":
                    where = {"root": str(root), "model": args.model}
                    row |= call("benchmarks.openvino_int8_recipes:worst_rows", where, timeout=1800)
                    folders[name] = str(shutil.copytree(layout.variant_dir(args.model, VARIANT, root), root / name))
                    print(f"{preset:12} {alpha:6g} {row['validation']:10.5f} {row['scoring']:8.5f}")
                else:
                    print(f"{preset:12} {alpha:6g} {info['status']}: {info['reason'][:80]}")
        params = load_params(params_file)
        with machine_lock(exclusive=True):
            race = call(
                "pipeline.measure.interleaved:contest",
                {"model": args.model, "variants": list(folders), "percentile": "p50", "root": str(root),
                 "config": params.select.contest.model_dump(), "folders": folders},
                timeout=params.bench.timeout_s,
                env=thread_env(params.bench.resolved_threads()),
            )  # fmt: skip
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"side by side: {race['how']}")
    ratios = {name: race["ratio_to_leader"].get(name, {"ratio": 1.0})["ratio"] for name in folders}
    for name in folders:
        row = rows[name]
        row |= {"p50_ms": race["latency_ms"][name], "ratio_to_fastest": ratios[name]}
        print(f"{row['preset']:12} {row['smooth_quant_alpha']:6g} {row['p50_ms']:8.3f} ms {ratios[name]:6.3f}x")
    write_json(args.out, {"model": args.model, "variant": VARIANT, "timing": race["how"], "recipes": rows})


if __name__ == "__main__":
    main()
