"""Which INT8 recipe holds on a model's real weights: a grid over one variant's knobs (default:
`openvino_int8`'s NNCF preset, symmetric `performance` or asymmetric `mixed`, crossed with
SmoothQuant's alpha on MatMuls, -1 off; or e.g. `openvino_int8_dynamic`'s group size and inference
precision), each recipe built by the pipeline's own pass in a scratch project and judged on the
validation rows (what a recipe may be chosen on) and, beside them, on the scoring rows (what the
selection reads): worst-row cosine to the FP32 source and neighbour recall@10. Then every recipe that
built is timed side by side with `onnx_fp32` in one process by the select stage's contest
(alternating blocks, bench threads, machine lock). Nothing else may run meanwhile.

    python -m benchmarks.openvino_int8_recipes [MODEL] [--grid preset=performance,mixed smooth_quant_alpha=0.95,-1]
    python -m benchmarks.openvino_int8_recipes --hf FOLDER --variant openvino_int8_dynamic \\
        --grid group_size=32,64,128 inference_precision=auto,f32

`--smoke`: one recipe (preset=performance) on a one-layer BERT of width 32 with random weights and
MiniLM's tokenizer (benchmarks.smoke.tiny_encoder) at seq 8, 64 text rows, a contest of a second: the script's
whole path on the real code, to check that it runs (tests/test_benchmarks.py).
"""

from __future__ import annotations

import argparse
import itertools
import shutil
import tempfile
from pathlib import Path
from typing import Any

import yaml

from benchmarks.scratch import added_project, scratch_project
from benchmarks.smoke import tiny_encoder, written_to
from pipeline.core import layout
from pipeline.core.config import PARAMS_FILE, load_params
from pipeline.core.files import write_json
from pipeline.core.isolate import call
from pipeline.core.records import Measured
from pipeline.machine.fingerprint import fingerprint
from pipeline.measure.contest import measure_contenders
from pipeline.optimize.stage import build_variant

BASELINE = "onnx_fp32"


def quality(found: dict[str, Any]) -> dict[str, float | None]:
    """Worst-row cosine and neighbour recall on the validation and scoring rows (scratch.fidelity_on)."""
    figures: dict[str, float | None] = {}
    for role, name in (("validation", layout.VALIDATION), ("scoring", layout.REFERENCE)):
        scored = Measured(fidelity=found["fidelity"][name])
        figures[role], figures[f"{role}_recall"] = scored.worst_cosine, scored.neighbour_recall
    return figures


def shown(value: float | None, digits: int) -> str:
    """A figure to print; `-` where there is none (too few rows, or every row alike)."""
    return "-" if value is None else f"{value:.{digits}f}"


def parse_grid(values: list[str]) -> dict[str, list[Any]]:
    """KEY=V1,V2 flags as {KEY: [V1, V2]}, each value read as YAML (numbers, words)."""
    return {key: [yaml.safe_load(v) for v in rest.split(",")] for key, _, rest in (f.partition("=") for f in values)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default="minilm_l6_pretrained")
    parser.add_argument("--hf", type=Path, help="a Hugging Face encoder folder, added with `add` on real text")
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--variant", default="openvino_int8")
    parser.add_argument("--grid", nargs="+", default=["preset=performance,mixed", "smooth_quant_alpha=0.95,0.5,-1"])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--smoke", action="store_true", help="one recipe on a tiny random encoder: checks that it runs")
    args = parser.parse_args()
    args.out = written_to(args.out, Path("reports/benchmarks/openvino_int8_recipes.json"), args.smoke)
    if args.smoke:
        args.hf, args.seq, args.variant = (
            tiny_encoder(Path(tempfile.mkdtemp(prefix="tiny-encoder-"))),
            8,
            "openvino_int8",
        )
        args.grid = ["preset=performance"]
    grid = parse_grid(args.grid)
    if args.hf:
        from benchmarks.transformer_int8 import text_rows

        model = "encoder"
        root = added_project(model, args.hf, text_rows(64 if args.smoke else 1200), args.seq, args.smoke)
    else:
        model, root = args.model, scratch_project(args.model, [])
    rows: dict[str, dict[str, Any]] = {}  # by recipe name, e.g. mixed_0.95
    folders: dict[str, str] = {}
    try:
        params_file = root / PARAMS_FILE
        assert build_variant(model, BASELINE, load_params(params_file), root).ok
        folders[BASELINE] = str(layout.variant_dir(model, BASELINE, root))
        print(f"{args.hf or model}: {args.variant} recipes ({fingerprint().cpu.model}); worst-row cosine "
              "and neighbour recall@10 to FP32")  # fmt: skip
        for values in itertools.product(*grid.values()):
            knobs = dict(zip(grid, values, strict=True))
            raw = yaml.safe_load(params_file.read_text())  # the build runs in a process that reads the file
            raw["catalog"][model].setdefault("overrides", {})[args.variant] = knobs
            params_file.write_text(yaml.safe_dump(raw, sort_keys=False))
            info = build_variant(model, args.variant, load_params(params_file), root)
            name = "_".join(f"{v:g}" if isinstance(v, float) else str(v) for v in values)
            row = rows[name] = {**knobs, "status": info.status}
            if not info.ok:
                print(f"{name:24} {info.status}: {info.reason[:80]}")
                continue
            where = {"root": str(root), "model": model, "variant": args.variant,
                     "row_files": [layout.VALIDATION, layout.REFERENCE]}  # fmt: skip
            row |= quality(call("benchmarks.scratch:fidelity_on", where, timeout=1800))
            folders[name] = str(shutil.copytree(layout.variant_dir(model, args.variant, root), root / name))
            print(f"{name:24} validation {shown(row['validation'], 5)} (recall {shown(row['validation_recall'], 3)})  "
                  f"scoring {shown(row['scoring'], 5)} (recall {shown(row['scoring_recall'], 3)})")  # fmt: skip
        params = load_params(params_file)
        race = measure_contenders(model, list(folders), params, root, folders=folders)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"side by side: {race['how']}")
    ratios = {name: race["ratio_to_leader"].get(name, {"ratio": 1.0})["ratio"] for name in folders}
    for name in folders:
        row = rows.setdefault(name, {})
        row |= {"p50_ms": race["latency_ms"][name], "ratio_to_fp32": ratios[name] / ratios[BASELINE]}
        print(f"{name:24} {row['p50_ms']:8.3f} ms {row['ratio_to_fp32']:6.3f}x {BASELINE}")
    write_json(args.out, {"model": str(args.hf or model), "variant": args.variant, "timing": race["how"],
                          "recipes": rows})  # fmt: skip


if __name__ == "__main__":
    main()
