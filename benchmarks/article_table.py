"""Reproduce the first seed article's table: its five frameworks on spam_fnn (1000 x 200), its flaws fixed.

The CPU inference article timed PyTorch, TensorFlow and JAX on the whole 1000-row batch, but ONNX
Runtime and OpenVINO with a Python loop over the rows one by one; it had no warm-up, gave JAX ones()
weights, ran every framework in one process (so its ~1 GB RSS column measured all of them) and
reported means only, taken one after the other. Here every framework runs the same weights (the zoo's
spam_fnn as torch_eager saves them; the outputs are compared with PyTorch's) on the same rows with the
same thread count, warmed up:

- side by side: all five loaded in one fresh process and timed on the whole batch in alternating blocks
  by the select stage's contest (pipeline.measure.interleaved.race), so that the machine's drift hits
  them alike: each one's median block p50 and its ratio to the fastest with a 95% interval;
- alone: each in a fresh process of its own, timed by the bench's loop (p50 with its 95% interval, mean,
  p99), its peak RSS (the kernel's high-water mark, before anything else is loaded), its outputs; ONNX
  Runtime and OpenVINO also timed the article's way (a loop over the rows, one call each, plain API).

PyTorch, ONNX Runtime and OpenVINO are the pipeline's torch_eager, onnx_fp32 and openvino_fp32 (f32
pinned), built in a scratch project and loaded by its runtimes; the pipeline has no TensorFlow or JAX
path for a PyTorch source (torch_xla needs torchax), so those two are written here with the same
weights, as the article wrote them: a Keras Sequential under tf.function, a jax.jit forward. Threads:
`bench.threads` for each (XLA's CPU pool has no count: all cores, single-threaded at 1). Run after
`dvc repro` (spam_fnn must be trained), with nothing else running (about 3 min on 2 cores):

    python -m benchmarks.article_table [--rows 1000]

Writes reports/benchmarks/article_table.json and .txt. `--smoke`: spam_fnn with its factory's seeded
weights and generated inputs (no training needed), 16 rows, the smoke bench and contest settings,
written to a temporary folder (tests/test_benchmarks.py); its figures mean nothing.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from benchmarks.scratch import entry, scratch_project
from benchmarks.smoke import measured_where_and_when, notes, run_params, write_table, written_to
from pipeline.core import layout
from pipeline.core.config import PARAMS_FILE, BenchConfig, ContestConfig
from pipeline.core.data import DataSet, sample_batch
from pipeline.core.isolate import call
from pipeline.machine.lock import machine_lock
from pipeline.measure.stage import thread_env

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "reports/benchmarks/article_table.json"
MODEL = "spam_fnn"
ARTICLE_MS = {"PyTorch": 1.26, "TensorFlow": 6.61, "JAX": 3.15, "ONNX Runtime": 14.75, "OpenVINO": 144.84}
BUILT = {"PyTorch": "torch_eager", "ONNX Runtime": "onnx_fp32", "OpenVINO": "openvino_fp32"}  # the pipeline's

Timed = tuple[Callable[[], Any], Callable[[], np.ndarray]]  # (the timed call, its outputs as an array)


def untrained(model: str) -> dict[str, Any]:
    """scratch_project overrides for a smoke run: `model` with its factory's seeded weights and generated
    inputs instead of the trained files `dvc repro` makes."""
    catalog = yaml.safe_load((REPO / PARAMS_FILE).read_text())["catalog"]
    kept = {k: v for k, v in catalog[model].items() if k not in ("file", "eval_data", "calib_data")}
    return {"catalog": {model: kept | {"init_seed": 0, "metric": "none"}}}


def batch(root: Path, rows: int) -> dict[str, np.ndarray]:
    """The first `rows` reference rows (repeated if fewer), as the article's one input of `rows` x 200."""
    return sample_batch(DataSet.load(layout.source_dir(MODEL, root) / layout.REFERENCE).inputs, rows)


def dense_layers(root: Path) -> list[tuple[np.ndarray, np.ndarray]]:
    """(weight as in x out, bias) of each Linear layer, from torch_eager's state_dict: PyTorch's weights."""
    import torch

    from pipeline.core.records import code_entry

    path, _ = entry(root, MODEL, BUILT["PyTorch"])
    state = torch.load(path.parent / (code_entry.load(path).weights or ""), weights_only=True)
    weights = [v.numpy() for k, v in state.items() if k.endswith("weight")]
    biases = [v.numpy() for k, v in state.items() if k.endswith("bias")]
    return [(w.T.copy(), b) for w, b in zip(weights, biases, strict=True)]


def keras_model(layers: list[tuple[np.ndarray, np.ndarray]], x: np.ndarray, threads: int) -> Timed:
    """The article's TensorFlow: a Keras Sequential (ReLU, sigmoid out) under a tf.function."""
    import keras
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    last = len(layers) - 1
    dense = [keras.layers.Dense(w.shape[1], activation="sigmoid" if i == last else "relu") for i, (w, _) in
             enumerate(layers)]  # fmt: skip
    model = keras.Sequential([keras.Input((x.shape[1],)), *dense])
    for layer, (w, b) in zip(dense, layers, strict=True):
        layer.set_weights([w, b])
    serve = tf.function(lambda t: model(t, training=False), input_signature=[tf.TensorSpec((None, x.shape[1]))])
    tensor = tf.constant(x)
    return lambda: serve(tensor), lambda: serve(tensor).numpy()


def jax_model(layers: list[tuple[np.ndarray, np.ndarray]], x: np.ndarray) -> Timed:
    """The article's JAX with PyTorch's weights (it used ones()): a jitted forward pass."""
    import jax

    params = [(jax.device_put(w), jax.device_put(b)) for w, b in layers]

    @jax.jit
    def forward(params: Any, inputs: Any) -> Any:
        for i, (w, b) in enumerate(params):
            inputs = inputs @ w + b
            inputs = jax.nn.sigmoid(inputs) if i == len(params) - 1 else jax.nn.relu(inputs)
        return inputs

    array = jax.device_put(x)
    return lambda: jax.block_until_ready(forward(params, array)), lambda: np.asarray(forward(params, array))


def built_model(framework: str, root: Path, feeds: dict[str, np.ndarray], threads: int) -> Timed:
    """A pipeline variant loaded by its runtime as the bench stage loads it."""
    from pipeline import runtimes

    path, build = entry(root, MODEL, BUILT[framework])
    session = runtimes.load(build.runtime, path, threads, build.runtime_config)
    return session.prepare(feeds), lambda: session.run(feeds)[session.output_names[0]]


def framework_model(framework: str, root: Path, feeds: dict[str, np.ndarray], threads: int) -> Timed:
    """`framework`'s forward pass on the whole batch `feeds`, ready to time."""
    if framework in BUILT:
        return built_model(framework, root, feeds, threads)
    (x,) = feeds.values()
    if framework == "TensorFlow":
        return keras_model(dense_layers(root), x, threads)
    return jax_model(dense_layers(root), x)


def ort_row_call(path: Path, threads: int) -> Callable[[np.ndarray], Any]:
    """ONNX Runtime as the article called it: a plain InferenceSession, one row per run."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    return lambda row: session.run(None, {name: row})


def openvino_row_call(path: Path, threads: int) -> Callable[[np.ndarray], Any]:
    """OpenVINO as the article called it: a compiled model (f32, as openvino_fp32), one row per call."""
    import openvino as ov

    properties = {"INFERENCE_NUM_THREADS": threads, "INFERENCE_PRECISION_HINT": "f32"}
    return ov.Core().compile_model(str(path), "CPU", properties)


ROW_CALLS = {"ONNX Runtime": ort_row_call, "OpenVINO": openvino_row_call}  # the frameworks the article fed row by row


def row_loop(framework: str, root: Path, x: np.ndarray, threads: int) -> Callable[[], None]:
    """The article's way: the runtime's plain API called once per row of `x`, in a Python loop."""
    path, _ = entry(root, MODEL, BUILT[framework])
    one, rows = ROW_CALLS[framework](path, threads), [x[i : i + 1] for i in range(len(x))]

    def loop() -> None:
        for row in rows:
            one(row)

    return loop


def alone(framework: str, root: str, rows: int, bench: dict[str, Any]) -> dict[str, Any]:
    """In a fresh process: one framework timed by the bench's loop, its peak RSS and its outputs; the
    article's row loop after (ONNX Runtime, OpenVINO)."""
    from pipeline.measure.harness import measure_latency, warm_up

    settings = BenchConfig.model_validate(bench)
    threads, feeds = settings.resolved_threads(), batch(Path(root), rows)
    timed, outputs = framework_model(framework, Path(root), feeds, threads)
    warm_up(timed, settings.warmup)
    latency = measure_latency(timed, settings.latency)
    interval = latency.p50_interval
    found = {"p50_ms": latency.stats.p50, "p50_ci95": [interval.low, interval.high], "mean_ms": latency.stats.mean,
             "p99_ms": latency.stats.p99, "calls": latency.stats.n,
             "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6,
             "outputs": np.asarray(outputs()).reshape(-1).tolist()}  # fmt: skip
    if framework in ROW_CALLS:
        loop = row_loop(framework, Path(root), next(iter(feeds.values())), threads)
        warm_up(loop, settings.warmup)
        by_row = measure_latency(loop, settings.latency)
        found |= {"row_by_row_p50_ms": by_row.stats.p50, "row_by_row_calls": by_row.stats.n}
    return found


def side_by_side(root: str, rows: int, bench: dict[str, Any], contest: dict[str, Any]) -> dict[str, Any]:
    """In a fresh process: the five frameworks loaded together, warmed up, and timed on the whole batch in
    alternating blocks (the select stage's race)."""
    from pipeline.measure.harness import warm_up
    from pipeline.measure.interleaved import race

    settings = BenchConfig.model_validate(bench)
    threads, feeds = settings.resolved_threads(), batch(Path(root), rows)
    calls = {framework: framework_model(framework, Path(root), feeds, threads)[0] for framework in ARTICLE_MS}
    for timed in calls.values():
        warm_up(timed, settings.warmup)
    return race(calls, "p50", ContestConfig.model_validate(contest))


def measure(root: Path, rows: int, bench: BenchConfig, contest: ContestConfig) -> dict[str, Any]:
    """Each framework alone, then all side by side, each in a fresh process, holding the machine."""
    env, bench_dict = thread_env(bench.resolved_threads()), bench.model_dump()
    with machine_lock(exclusive=True):
        found = {framework: call("benchmarks.article_table:alone", {"framework": framework, "root": str(root),
                                 "rows": rows, "bench": bench_dict}, timeout=900, env=env)
                 for framework in ARTICLE_MS}  # fmt: skip
        race = call("benchmarks.article_table:side_by_side", {"root": str(root), "rows": rows, "bench": bench_dict,
                    "contest": contest.model_dump()}, timeout=900, env=env)  # fmt: skip
    reference = np.asarray(found["PyTorch"]["outputs"])
    for framework, row in found.items():
        row["max_abs_diff_vs_pytorch"] = float(np.abs(np.asarray(row.pop("outputs")) - reference).max())
        row["side_by_side"] = side_by_side_row(framework, race)
    return {"frameworks": found, "side_by_side_how": race["how"], "side_by_side_stopped_by": race["stopped_by"]}


def side_by_side_row(framework: str, race: dict[str, Any]) -> dict[str, Any]:
    """One framework's figures in the race: median block p50, ratio to the fastest with its 95% interval
    (none for the fastest), and the timed calls (rounds x calls per block)."""
    ratio = race["ratio_to_leader"].get(framework)
    return {"p50_ms": race["latency_ms"][framework], "fastest": ratio is None,
            "ratio_to_fastest": ratio["ratio"] if ratio else 1.0,
            "ratio_ci95": [ratio["low"], ratio["high"]] if ratio else None,
            "calls": race["rounds"] * race["calls_per_block"][framework]}  # fmt: skip


def interval_text(bounds: list[float] | None) -> str:
    """A 95% interval to print; its absence said (too few rounds or blocks for one)."""
    if bounds is None or not all(np.isfinite(bounds)):
        return "(no interval)"
    return f"({bounds[0]:.3f}-{bounds[1]:.3f})"


def table(result: dict[str, Any]) -> list[str]:
    """The printed table, one line per framework, then how, where and when it was measured."""
    header = ("framework", "article", "side by side", "calls", "x fastest (95% CI)", "alone p50 (95% CI)", "calls",
              "article's way", "peak RSS", "max |diff|")  # fmt: skip
    lines = ["{:<13} {:>9} {:>12} {:>6} {:>21} {:>27} {:>6} {:>13} {:>8} {:>10}".format(*header)]
    for framework, row in result["frameworks"].items():
        together = row["side_by_side"]
        ratio = f"{together['ratio_to_fastest']:.3f} {interval_text(together['ratio_ci95'])}"
        loop = f"{row['row_by_row_p50_ms']:.2f} ms" if "row_by_row_p50_ms" in row else "-"
        lines.append(
            f"{framework:<13} {ARTICLE_MS[framework]:>6.2f} ms {together['p50_ms']:>9.3f} ms {together['calls']:>6} "
            f"{'fastest' if together['fastest'] else ratio:>21} {row['p50_ms']:>8.3f} ms "
            f"{interval_text(row['p50_ci95']):>15} {row['calls']:>6} {loop:>13} {row['peak_rss_mb']:>5.0f} MB "
            f"{row['max_abs_diff_vs_pytorch']:>10.1e}"
        )
    bench = result["bench"]
    return lines + notes(
        f"{MODEL} (200-128-64-32-16-8-1), one call on all {result['rows']} rows; {result['threads']} threads each;"
        f" warm-up {bench['warmup']['iters']} calls and {bench['warmup']['seconds']:g} s before any timing.",
        f"side by side: {result['side_by_side_how']}; stopped: {result['side_by_side_stopped_by']}.",
        "alone: each framework in its own fresh process, the bench's loop (p50 of all timed calls, its 95% interval"
        " over blocks); peak RSS there, before the article's way was loaded; the article's way = one plain-API call"
        " per row in a Python loop, timed the same way; max |diff| = largest output difference from PyTorch.",
        f"{result['machine']}, {result['measured_utc']}.",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1000, help="the batch every framework is fed (the article's 1000)")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--smoke", action="store_true", help="seeded spam_fnn, 16 rows: checks that it runs")
    args = parser.parse_args()
    args.out = written_to(args.out, OUT, args.smoke)
    params = run_params(args.smoke)
    rows = 16 if args.smoke else args.rows
    started = time.gmtime()
    root = scratch_project(MODEL, list(BUILT.values()), untrained(MODEL) if args.smoke else None)
    try:
        measured = measure(root, rows, params.bench, params.select.contest)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    result = {
        **measured_where_and_when(started),
        "rows": rows,
        "threads": params.bench.resolved_threads(),
        "bench": params.bench.model_dump(include={"warmup", "latency"}),
        "article_ms": ARTICLE_MS,
        **measured,
    }
    write_table(args.out, result, table(result))


if __name__ == "__main__":
    main()
