"""Does one runtime's spinning thread pool tax the next contender's block (issue 67)?

One model's ONNX file in ONNX Runtime and in OpenVINO (f32, as onnx_fp32 and openvino_fp32), loaded in one
process with the pipeline's own adapters (pipeline.runtimes, 2 threads each unless --threads), timed in blocks of
~10 ms (the contest's block) in rounds. Each round times the same contender's block three ways, in turns:
  - right after the other runtime's block (what the contest did before issue 67),
  - after the other runtime's block and the contest's settle (pipeline.measure.interleaved.settle: what it does
    now),
  - after a long pause (PAUSE_S, far past any pool's spin: the block measured alone),
and the same for the other runtime. Per contender, the ratio of each way to the long pause, the median over the
rounds with its interval (pipeline.core.stats.paired_ratio_interval): above 1 is the other runtime's tax; the
settled ratio within 2% of 1 says the contest's blocks measure each contender alone.

    python -m benchmarks.contest_separation MODEL.onnx [MORE.onnx ...] [--rounds 60]

Writes reports/benchmarks/contest_separation.json (and .txt). Nothing else may run meanwhile. `--smoke`: a tiny
MatMul file, 4 rounds (tests/test_benchmarks.py); its figures mean nothing.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.smoke import measured_where_and_when, notes, tiny_onnx, write_table, written_to
from pipeline.core.config import ContestConfig
from pipeline.core.stats import paired_ratio_interval
from pipeline.measure.harness import seconds_per_call, warm_up
from pipeline.measure.interleaved import settle

OUT = Path(__file__).resolve().parents[1] / "reports" / "benchmarks" / "contest_separation.json"
BLOCK_S = 0.01  # the contest's block_seconds
MIN_CALLS = 10  # the contest's min_block_calls
PAUSE_S = 0.3  # a pause longer than any pool's spin (the settle cap is 0.25 s)
WAYS = ("after the other", "after the other, settled", "after a pause")


def calls_for(model: Path, threads: int, rows: int = 1) -> dict[str, Callable[[], Any]]:
    """The model in each runtime, loaded as the pipeline loads a variant, its call prepared on one input row."""
    import onnx

    from pipeline.core.config import InputSpec, WarmupConfig
    from pipeline.core.data import generate_inputs
    from pipeline.runtimes import load

    graph = onnx.load(str(model), load_external_data=False)
    initializers = {i.name for i in graph.graph.initializer}
    specs = {}
    for value in graph.graph.input:
        if value.name in initializers:
            continue
        dims = [d.dim_value if d.dim_value else rows for d in value.type.tensor_type.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(value.type.tensor_type.elem_type).name
        specs[value.name] = {"shape": dims, "dtype": dtype}
    inputs = generate_inputs({k: InputSpec.model_validate(v) for k, v in specs.items()}, rows, seed=0)
    prepared = {}
    settings = {"onnxruntime": {}, "openvino": {"inference_precision": "f32"}}  # onnx_fp32's and openvino_fp32's
    for runtime, config in settings.items():
        call = load(runtime, model, threads, config).prepare(inputs)
        warm_up(call, WarmupConfig())
        prepared[runtime] = call
    return prepared


def block(call: Callable[[], Any], n: int) -> float:
    """The median seconds per call over one block of `n` calls (two untimed first, as the contest's)."""
    call(), call()
    times = np.empty(n)
    for i in range(n):
        t0 = time.perf_counter()
        call()
        times[i] = time.perf_counter() - t0
    return float(np.median(times))


def measure(calls: dict[str, Callable[[], Any]], rounds: int) -> dict[str, Any]:
    """Each contender's block after the other (bare, settled) and after a long pause, round after round."""
    per_block = {name: max(MIN_CALLS, int(BLOCK_S / seconds_per_call(call))) for name, call in calls.items()}
    found: dict[str, dict[str, list[float]]] = {name: {way: [] for way in WAYS} for name in calls}
    settled: dict[str, list[float]] = {name: [] for name in calls}
    names = list(calls)
    for r in range(rounds):
        for name in names[r % 2 :] + names[: r % 2]:  # turning order, as the contest's
            other = next(n for n in names if n != name)
            for way in np.random.default_rng(r).permutation(WAYS):  # the three ways in a fresh order each round
                time.sleep(PAUSE_S)  # every way starts from a quiet machine
                if way != "after a pause":
                    block(calls[other], per_block[other])
                    if way == "after the other, settled":
                        settled[other].append(settle(ContestConfig()))
                found[name][way].append(block(calls[name], per_block[name]))
    result = {}
    for name, ways in found.items():
        alone, other = np.asarray(ways["after a pause"]), next(n for n in names if n != name)
        result[name] = {way: ratio_figures(np.asarray(ways[way]) / alone) for way in WAYS[:2]} | {
            "alone_ms": round(float(np.median(alone)) * 1e3, 4),
            "calls_per_block": per_block[name],
            "other_settle_ms": round(float(np.median(settled[other])) * 1e3, 2),
        }
    return result


def ratio_figures(ratios: np.ndarray) -> dict[str, float]:
    """The median ratio over the rounds and its 95% interval (paired_ratio_interval)."""
    interval = paired_ratio_interval(ratios)
    return {"center": round(interval.center, 4), "low": round(interval.low, 4), "high": round(interval.high, 4)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", type=Path, help="ONNX files (each run in both runtimes)")
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if args.smoke:
        args.models, args.rounds = [tiny_onnx(Path(tempfile.mkdtemp(prefix="separation-")))], 4
    if not args.models:
        parser.error("give one or more ONNX files (or --smoke)")
    out = written_to(args.out, OUT, args.smoke)
    started = time.gmtime()
    figures = {str(m): measure(calls_for(m, args.threads), args.rounds) for m in args.models}
    result = {**measured_where_and_when(started), "rounds": args.rounds, "threads": args.threads,
              "how": f"blocks of ~{BLOCK_S * 1e3:g} ms (at least {MIN_CALLS} calls, 2 untimed first), median per call; "
              f"each way's block over the same contender's after a {PAUSE_S * 1e3:g} ms pause, per round; median "
              "ratio and its 95% interval over the rounds (paired_ratio_interval)", "models": figures}  # fmt: skip
    lines = [f"{'model':<40} {'contender':<12} {'alone ms':>9} {'after other':>22} {'after other, settled':>22}"]
    for model, contenders in figures.items():
        for name, row in contenders.items():
            cells = [f"x{row[w]['center']:.3f} ({row[w]['low']:.3f}-{row[w]['high']:.3f})" for w in WAYS[:2]]
            lines.append(
                f"{Path(model).name[:40]:<40} {name:<12} {row['alone_ms']:>9.4g} {cells[0]:>22} {cells[1]:>22}"
            )
    lines += notes(f"{result['machine']}, {result['measured_utc']}; {args.threads} threads each; {result['how']}.")
    write_table(out, result, lines)


if __name__ == "__main__":
    main()
