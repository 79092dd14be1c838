"""Reproduce the CPU inference benchmark article's table on spam_fnn (input 1000 x 200), honestly.

The article timed PyTorch, TensorFlow and JAX on the whole 1000-row batch, but ONNX Runtime and
OpenVINO with a Python loop over the rows one by one; it had no warm-up, gave JAX ones() weights,
ran every framework in one process (so its RSS column measured all of them) and reported means
only. Here every framework gets the same trained weights (checked: outputs agree), runs in its own
process with the same thread count, is warmed up and timed by the pipeline's harness on the whole
batch; ONNX Runtime and OpenVINO are also timed the article's way, to show where its 115x OpenVINO
gap came from. Run `dvc repro` first (spam_fnn must be trained).

    python -m benchmarks.article_table
"""

from __future__ import annotations

import argparse
import resource
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.scratch import scratch_project
from pipeline.core import layout
from pipeline.core.config import LatencyConfig, WarmupConfig, load_params
from pipeline.core.data import DataSet
from pipeline.core.files import read_json, write_json
from pipeline.core.isolate import call
from pipeline.machine.fingerprint import fingerprint
from pipeline.measure.harness import measure_latency, warm_up

ARTICLE_MS = {"PyTorch": 1.26, "TensorFlow": 6.61, "JAX": 3.15, "ONNX Runtime": 14.75, "OpenVINO": 144.84}
MODEL = "spam_fnn"
ROWS = 1000
LATENCY = LatencyConfig(min_seconds=2.0, max_seconds=10.0)


def _torch_layers(root: Path) -> list[tuple[np.ndarray, np.ndarray]]:
    """(weight, bias) of each Linear layer of the trained source, as (in, out) matrices."""
    import torch

    state = torch.load(root / "models" / MODEL / "trained" / "weights.pt", weights_only=True)
    weights = [v.numpy() for k, v in state.items() if k.endswith("weight")]
    biases = [v.numpy() for k, v in state.items() if k.endswith("bias")]
    return [(w.T.copy(), b) for w, b in zip(weights, biases, strict=True)]


def _article_row_call(framework: str, artifact: Path, threads: int, name: str) -> Any:
    """The article's way, written with each runtime's plain API: one call per row."""
    if framework == "ONNX Runtime":
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        session = ort.InferenceSession(str(artifact), options, providers=["CPUExecutionProvider"])
        return lambda row: session.run(None, {name: row})
    if framework == "OpenVINO":
        import openvino as ov

        config = {"INFERENCE_NUM_THREADS": threads, "INFERENCE_PRECISION_HINT": "f32"}
        compiled = ov.Core().compile_model(str(artifact), "CPU", config)
        return lambda row: compiled(row)
    return None


def _forward(framework: str, root: Path, x: np.ndarray, threads: int) -> tuple[Any, Any, Any]:
    """(call on the whole batch, call on one row, get outputs of the whole batch)."""
    if framework in ("ONNX Runtime", "OpenVINO", "PyTorch"):
        from pipeline.runtimes import load

        variant = {"ONNX Runtime": "onnx_fp32", "OpenVINO": "openvino_fp32", "PyTorch": "torch_eager"}[framework]
        build = read_json(layout.variant_dir(MODEL, variant, root) / layout.BUILD_INFO)
        session = load(build["runtime"], layout.variant_dir(MODEL, variant, root) / build["entry"], threads,
                       build["runtime_config"])  # fmt: skip
        name = session.input_names[0]
        artifact = layout.variant_dir(MODEL, variant, root) / build["entry"]
        one_row = _article_row_call(framework, artifact, threads, name)
        return session.prepare({name: x}), one_row, lambda: session.run({name: x})[session.output_names[0]]
    layers = _torch_layers(root)
    if framework == "TensorFlow":
        import keras
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(1)
        model = keras.Sequential([keras.Input((x.shape[1],))] + [
            keras.layers.Dense(w.shape[1], activation="sigmoid" if i == len(layers) - 1 else "relu")
            for i, (w, _) in enumerate(layers)
        ])  # fmt: skip
        for dense, (w, b) in zip(model.layers, layers, strict=True):
            dense.set_weights([w, b])
        serve = tf.function(lambda t: model(t, training=False), input_signature=[tf.TensorSpec((None, x.shape[1]))])
        tensor = tf.constant(x)
        return lambda: serve(tensor), None, lambda: serve(tensor).numpy()
    import jax
    import jax.numpy as jnp

    params = [(jnp.asarray(w), jnp.asarray(b)) for w, b in layers]

    @jax.jit
    def forward(params: Any, inputs: Any) -> Any:
        for i, (w, b) in enumerate(params):
            inputs = inputs @ w + b
            inputs = jax.nn.sigmoid(inputs) if i == len(params) - 1 else jax.nn.relu(inputs)
        return inputs

    array = jax.device_put(x)
    return lambda: jax.block_until_ready(forward(params, array)), None, lambda: np.asarray(forward(params, array))


def time_framework(framework: str, root: str, threads: int) -> dict[str, Any]:
    """In a fresh process: one framework, the whole batch, and (ORT, OpenVINO) the article's row loop."""
    x = np.ascontiguousarray(
        DataSet.load(layout.source_dir(MODEL, Path(root)) / layout.REFERENCE).inputs["features"][:ROWS]
    )
    batch, one_row, outputs = _forward(framework, Path(root), x, threads)
    warm_up(batch, WarmupConfig(iters=20, seconds=0.5))
    result = measure_latency(batch, LATENCY)
    timing = {"batch_mean_ms": result.stats.mean, "batch_p50_ms": result.stats.p50, "batch_p99_ms": result.stats.p99,
              "n": result.stats.n}  # fmt: skip
    if one_row is not None:
        rows = [x[i : i + 1] for i in range(ROWS)]
        for row in rows[:100]:
            one_row(row)
        loops = []
        for _ in range(5):
            start = time.perf_counter()
            for row in rows:
                one_row(row)
            loops.append(1000 * (time.perf_counter() - start))
        timing["row_loop_ms"] = float(np.median(loops))
    timing["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6
    timing["outputs"] = np.asarray(outputs()).reshape(-1).tolist()
    return timing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("reports/benchmarks/article_table.json"))
    args = parser.parse_args()
    threads = load_params().bench.resolved_threads()
    root = scratch_project(MODEL, ["onnx_fp32", "openvino_fp32", "torch_eager"], {"export": {"max_eval_samples": ROWS}})
    try:
        results = {fw: call("benchmarks.article_table:time_framework", {"framework": fw, "root": str(root),
                                                                         "threads": threads}, timeout=900)
                   for fw in ARTICLE_MS}  # fmt: skip
    finally:
        shutil.rmtree(root, ignore_errors=True)
    reference = np.asarray(results["PyTorch"]["outputs"])
    for timing in results.values():
        timing["max_abs_diff_vs_pytorch"] = float(np.abs(np.asarray(timing.pop("outputs")) - reference).max())
    cpu = fingerprint()["cpu"]
    write_json(args.out, {"rows": ROWS, "threads": threads, "machine": f"{cpu['model']}, {cpu['cores']} cores",
                          "article_ms": ARTICLE_MS, "results": results})  # fmt: skip
    header = ("framework", "article", "ours mean", "ours p50", "article's way", "peak RSS", "max |diff|")
    lines = ["{:<13} {:>9} {:>10} {:>9} {:>14} {:>9} {:>10}".format(*header)]
    for framework, article in ARTICLE_MS.items():
        r = results[framework]
        loop = f"{r['row_loop_ms']:.2f} ms" if "row_loop_ms" in r else "-"
        lines.append(
            f"{framework:<13} {article:>6.2f} ms {r['batch_mean_ms']:>7.3f} ms {r['batch_p50_ms']:>6.3f} ms "
            f"{loop:>14} {r['peak_rss_mb']:>6.0f} MB {r['max_abs_diff_vs_pytorch']:>10.1e}"
        )
    lines += [
        f"spam_fnn (200-128-64-32-16-8-1), one call on all {ROWS} rows; {threads} threads; each framework in its own",
        "process, after warm-up; 'article's way' = a Python loop over the rows one by one (median of 5 loops);",
        "max |diff| = largest output difference from PyTorch (the same trained weights everywhere).",
    ]
    print("\n".join(lines))
    args.out.with_suffix(".txt").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
