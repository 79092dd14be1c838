"""Weight-only INT4 on a decoder large enough to be bound by its weights (issue 21): is INT4's time
per output token at most 0.45x FP32's, with perplexity at most 3% above the FP32 source's?

Runs on the artifacts the pipeline built for the model (default lm_large: `dvc exp run -S
'models=[lm_large]'`, or its stage scripts). Each runtime's FP32 and INT4 variants are loaded in one
process and timed interleaved: every round, each variant in turning order generates `--tokens`
tokens greedily from a held-out prompt (another row each round); its round figure is the median
time of the tokens after the first. The INT4/FP32 ratio per round gives the median ratio and its
95% interval (order statistics joined with a t interval over 5 stretches, as the select stage's
contest). Perplexity and next-token agreement on `--rows` held-out windows, against the FP32
source's (the export's reference). Nothing else may run meanwhile (the machine lock is held).

    python -m benchmarks.decoder_int4 [--model lm_large] [--rounds 30]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.core import layout
from pipeline.core.config import load_params
from pipeline.core.data import DataSet
from pipeline.core.files import read_json, write_json
from pipeline.machine.lock import machine_lock
from pipeline.machine.naming import current
from pipeline.measure.generation import prompts, quality
from pipeline.measure.stats import paired_ratio_interval
from pipeline.runtimes import load

PAIRS = {
    "onnxruntime-genai": ("lm_onnx_fp32", "lm_onnx_int4"),
    "openvino-genai": ("lm_openvino_fp32", "lm_openvino_int4"),
}
GOAL_RATIO, GOAL_PPL_PCT = 0.45, 3.0


def loaded(model: str, variant: str, threads: int) -> Any:
    folder = layout.variant_dir(model, variant)
    build = read_json(folder / layout.BUILD_INFO)
    if build["status"] != "ok":
        raise SystemExit(f"{variant} of {model} is {build['status']}: {build['reason']} (build it first)")
    return load(build["runtime"], folder / build["entry"], threads, build["runtime_config"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="lm_large")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--tokens", type=int, default=17)
    parser.add_argument("--prompt", type=int, default=16)
    parser.add_argument("--rows", type=int, default=16)
    parser.add_argument("--out", type=Path, default=Path("reports/benchmarks/decoder_int4"))
    args = parser.parse_args()
    threads = load_params().bench.resolved_threads()
    reference = DataSet.load(layout.source_dir(args.model) / layout.REFERENCE)
    ids = reference.inputs["input_ids"]
    variants = [v for pair in PAIRS.values() for v in pair]
    generators = {v: loaded(args.model, v, threads) for v in variants}
    tpot: dict[str, list[float]] = {v: [] for v in variants}
    with machine_lock(exclusive=True):
        for generator in generators.values():  # warm-up, untimed
            generator.generate(prompts(ids, args.prompt, 1), args.tokens)
        start = time.perf_counter()
        for round_ in range(args.rounds):
            order = variants[round_ % len(variants) :] + variants[: round_ % len(variants)]
            for variant in order if round_ % 2 == 0 else order[::-1]:
                run = generators[variant].generate(prompts(ids, args.prompt, 1, first_row=round_), args.tokens)
                tpot[variant].append(1000 * float(np.median(run.step_s)))
        seconds = time.perf_counter() - start
    rows = ids[: args.rows]
    scored = {v: quality(generators[v], reference.outputs, rows) for v in variants}
    machine = current()["name"]
    result: dict[str, Any] = {"model": args.model, "machine": machine, "threads": threads, "rounds": args.rounds,
                              "seconds": round(seconds, 1), "runtimes": {}}  # fmt: skip
    lines = [
        f"{args.model} on {machine}, {threads} threads: INT4 vs FP32 time per output token, interleaved "
        f"({args.rounds} rounds in {seconds:.0f} s; each round every variant generates {args.tokens} tokens "
        f"after a {args.prompt}-token held-out prompt; round figure: the median token after the first)",
        f"quality on {len(rows)} held-out windows of {rows.shape[1]} tokens vs the FP32 source "
        f"(goal: ratio <= {GOAL_RATIO}, perplexity <= +{GOAL_PPL_PCT}%)",
        "",
    ]
    for runtime, (fp32, int4) in PAIRS.items():
        ratio = paired_ratio_interval(np.array(tpot[int4]) / np.array(tpot[fp32]))
        ppl = scored[int4]["perplexity"]["increase_pct"]
        met = ratio.high <= GOAL_RATIO and ppl <= GOAL_PPL_PCT
        result["runtimes"][runtime] = {
            "fp32": fp32, "int4": int4, "fp32_tpot_ms": float(np.median(tpot[fp32])),
            "int4_tpot_ms": float(np.median(tpot[int4])), "ratio": ratio.center, "ratio_low": ratio.low,
            "ratio_high": ratio.high, "int4_ppl_increase_pct": ppl, "fp32_ppl_increase_pct":
            scored[fp32]["perplexity"]["increase_pct"], "int4_top1_agreement":
            scored[int4]["fidelity"]["logits"]["top1_agreement"], "goal_met": met,
        }  # fmt: skip
        lines.append(
            f"{runtime:18} {fp32} {np.median(tpot[fp32]):.2f} ms, {int4} {np.median(tpot[int4]):.2f} ms: "
            f"x{ratio.center:.3f} (95% CI {ratio.low:.3f}-{ratio.high:.3f}); INT4 perplexity "
            f"{ppl:+.2f}% (FP32 {scored[fp32]['perplexity']['increase_pct']:+.3f}%), next-token agreement "
            f"{scored[int4]['fidelity']['logits']['top1_agreement']:.3f}: goal {'met' if met else 'NOT met'}"
        )
    text = "\n".join(lines) + "\n"
    print(text, end="")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".txt").write_text(text)
    write_json(args.out.with_suffix(".json"), result)


if __name__ == "__main__":
    main()
