"""Harness overhead: our reported p50 against a bare `session.run` loop, in one process, one run.

Goal (issue 2): for onnx_fp32 on spam_fnn our p50 is within 3% of the bare loop's p50. Both loops
time single calls with perf_counter_ns on the same session and the same batch-1 input; ours runs
with the worker's RSS sampler thread beside it, as in a benchmark; they take
turns (ABAB...) so that drift in the machine's state hits both alike. Run after `dvc repro`, with
nothing else running:  python benchmarks/harness_overhead.py [--rounds 5] [--out FILE]

`--smoke`: one short round on a 16x4 MatMul ONNX file written to a temporary folder (no `dvc repro`
needed), to check that the script runs (tests/test_benchmarks.py); its ratio means nothing.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.smoke import tiny_onnx, written_to
from pipeline.core import layout
from pipeline.core.config import PARAMS_FILE, LatencyConfig, WarmupConfig, load_params
from pipeline.core.data import DataSet, sample_batch
from pipeline.core.files import write_json
from pipeline.core.memory import RssSampler
from pipeline.core.records import build as build_record
from pipeline.machine.fingerprint import fingerprint
from pipeline.measure.harness import measure_latency, warm_up
from pipeline.runtimes import load

REPO = Path(__file__).resolve().parents[1]


def bare_session(path: Path, threads: int):
    """What a user would write: an InferenceSession with the same thread count, nothing else."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def bare_loop_p50_ms(session, feeds: dict, seconds: float) -> float:
    """Call session.run in a loop and time each call.

    Output names are passed as our adapter does: `run(None, ...)` makes ORT look the names up in
    Python on every call, about 0.2 us more here, which would flatter the harness at this scale.
    """
    names = [o.name for o in session.get_outputs()]
    samples = []
    clock = time.perf_counter_ns
    end = clock() + seconds * 1e9
    while clock() < end:
        t0 = clock()
        session.run(names, feeds)
        samples.append(clock() - t0)
    return float(np.percentile(samples, 50)) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="spam_fnn")
    parser.add_argument("--variant", default="onnx_fp32")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--smoke", action="store_true", help="one short round on a tiny ONNX file: checks that it runs")
    args = parser.parse_args()
    args.out = written_to(args.out, Path("reports/benchmarks/harness_overhead.json"), args.smoke)

    bench = load_params(REPO / PARAMS_FILE).bench
    threads = bench.resolved_threads()
    if args.smoke:
        args.model, args.variant, args.rounds = "smoke", "onnx_fp32", 1
        short = {
            "warmup": WarmupConfig(iters=1, seconds=0),
            "latency": LatencyConfig(min_seconds=0.05, max_seconds=0.2),
        }
        bench = bench.model_copy(update=short)
        artifact = tiny_onnx(Path(tempfile.mkdtemp(prefix="harness-smoke-")))
        feeds, runtime = {"x": np.ones((1, 16), np.float32)}, "onnxruntime"
    else:
        build = build_record.load(layout.variant_dir(args.model, args.variant))
        artifact, runtime = layout.variant_dir(args.model, args.variant) / build.entry, build.runtime
        feeds = sample_batch(DataSet.load(layout.source_dir(args.model) / layout.REFERENCE).inputs, 1)
    session = load(runtime, artifact, threads)
    bare = bare_session(artifact, threads)
    ours_call = session.prepare(feeds)
    warm_up(ours_call, bench.warmup)
    warm_up(lambda: bare.run(None, feeds), bench.warmup)

    ours, bare_p50 = [], []
    for _ in range(args.rounds):
        with RssSampler() as sampler, sampler.phase("latency"):  # as in the worker: memory sampled meanwhile
            ours.append(measure_latency(ours_call, bench.latency).stats.p50)
        bare_p50.append(bare_loop_p50_ms(bare, feeds, bench.latency.min_seconds))
    ratio = float(np.median(ours) / np.median(bare_p50))
    result = {
        "model": args.model,
        "variant": args.variant,
        "threads": threads,
        "rounds": args.rounds,
        "ours_p50_ms_by_round": {f"r{i}": v for i, v in enumerate(ours)},
        "bare_p50_ms_by_round": {f"r{i}": v for i, v in enumerate(bare_p50)},
        "ours_p50_ms": float(np.median(ours)),
        "bare_p50_ms": float(np.median(bare_p50)),
        "ratio": ratio,
        "goal": "|ratio - 1| <= 0.03",
        "met": abs(ratio - 1) <= 0.03,
        "machine": f"{fingerprint().cpu.model}, {fingerprint().cpu.cores} cores",
    }
    write_json(args.out, result)
    print(
        f"{args.model}/{args.variant}, {threads} threads, {args.rounds} alternating rounds: "
        f"harness p50 {result['ours_p50_ms'] * 1000:.2f} us, "
        f"bare session.run p50 {result['bare_p50_ms'] * 1000:.2f} us, "
        f"ratio {ratio:.3f} (goal within 3%: {'met' if result['met'] else 'NOT met'})"
    )


if __name__ == "__main__":
    main()
