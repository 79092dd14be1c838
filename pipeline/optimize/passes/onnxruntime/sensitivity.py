"""Which layers static INT8 should leave in float, found by measuring, not guessed.

ONNX Runtime's own debugging tool (onnxruntime.quantization.qdq_loss_debug) runs the QDQ model with
every intermediate tensor as an output, on a few validation rows, and pairs each quantized
activation before and after its QuantizeLinear/DequantizeLinear: the signal-to-quantization-noise
ratio (SQNR, dB) of that pair says how much the 8-bit grid loses there. Pretrained transformers
have a few activations with outliers (a handful of channels 100x the rest), whose grid is so
coarse that the small values vanish: those rank lowest. The quantizer is then run again with the
consumers of the worst tensors excluded, 1, 2, 4, ... at a time, until the validation rows reach the
search's target (pipeline.core.evaluate.SearchGoal: the task metric within `max_metric_drop` of the
source's when there are labels, else every output's decision score at `target_score`), as NNCF's
accuracy control does for OpenVINO. Validation rows only: the scoring rows stay unseen.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.core import onnx_files
from pipeline.core.data import Arrays, padded_batches, run_batched
from pipeline.core.evaluate import SearchGoal

SENSITIVITY_ROWS = 16  # validation rows run through the augmented model (every tensor kept: memory)


@dataclass(frozen=True)
class Layout:
    """How rows-first arrays reach the graph and come back (BuildContext.model_inputs / rows_out)."""

    to_model: Callable[[Arrays], Arrays] = dict
    rows_out: Callable[[Arrays], Arrays] = dict


def goal_figure(model: Path, goal: SearchGoal, batch: int, fixed: bool = False, layout: Layout = Layout()) -> float:
    """The search goal's figure (higher is better) of the ONNX model at `model` on the goal's rows."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(model), onnx_files.session_options(), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]

    def run(chunk: Arrays) -> Arrays:
        return layout.rows_out(dict(zip(names, session.run(None, layout.to_model(chunk)), strict=True)))

    return goal.figure(run_batched(run, goal.rows.inputs, batch, fixed))


def ranked_activations(
    float_model: Path,
    qdq_model: Path,
    rows: Arrays,
    batch: int,
    op_types: list[str] | None,
    to_model: Callable[[Arrays], Arrays] = dict,
) -> list[dict[str, Any]]:
    """Quantized activations feeding `op_types` nodes, worst SQNR first, each with those nodes."""
    import onnx
    from onnxruntime.quantization.qdq_loss_debug import (
        collect_activations,
        compute_signal_to_quantization_noice_ratio,
        create_activation_matching,
        modify_model_output_intermediate_tensors,
    )

    with tempfile.TemporaryDirectory(prefix="qdq-debug-") as scratch:
        augmented = str(Path(scratch) / "augmented.onnx")
        modify_model_output_intermediate_tensors(str(qdq_model), augmented, save_as_external_data=True)
        batches = [to_model(chunk) for chunk, _ in padded_batches(rows, batch)]
        pairs = create_activation_matching(collect_activations(augmented, iter(batches)))
    # ORT's compute_activation_error needs the float model's activations too; the local error is this
    sqnr = compute_signal_to_quantization_noice_ratio
    errors = {name: sqnr(pair["pre_qdq"], pair["post_qdq"]) for name, pair in pairs.items()}
    graph = onnx.load(str(float_model), load_external_data=False).graph
    consumers: dict[str, list[str]] = {}
    for node in graph.node:
        if op_types and node.op_type not in op_types:
            continue
        for name in node.input:
            consumers.setdefault(name, []).append(node.name)
    ranked = [
        {"tensor": name, "sqnr_db": round(db, 2), "nodes": consumers[name]}
        for name, db in errors.items()
        if consumers.get(name) and np.isfinite(db)
    ]
    return sorted(ranked, key=lambda r: r["sqnr_db"])


def restore_until(
    quantize: Callable[[list[str]], Path],
    float_model: Path,
    goal: SearchGoal,
    batch: int,
    op_types: list[str] | None,
    target: float,
    max_excluded: int,
    fixed: bool = False,
    layout: Layout = Layout(),
) -> dict[str, Any]:
    """Quantize, and while the goal's figure on the validation rows is below `target`, quantize again
    with the consumers of the 1, 2, 4, ... lowest-SQNR activations in float. Ends with the artifact of
    the best try on disk (`quantize` writes the model; it is given the extra nodes to exclude)."""
    model = quantize([])
    tries = [{"excluded_tensors": 0, "validation_figure": round(goal_figure(model, goal, batch, fixed, layout), 6)}]
    if tries[0]["validation_figure"] >= target or max_excluded == 0:
        return {"tries": tries, "kept": 0, "excluded_nodes": []}
    ranked = goal.rows.head(SENSITIVITY_ROWS)  # never padded past its rows unless the batch is fixed
    ranking = ranked_activations(
        float_model, model, ranked.inputs, batch if fixed else min(batch, len(ranked)), op_types, layout.to_model
    )
    if not ranking:  # a QOperator model (rescue ort_qdq_unloadable) has no Q/DQ pair per activation to rank
        note = "nothing to rank: the model holds no QuantizeLinear/DequantizeLinear pair per activation"
        return {"tries": tries, "kept": 0, "excluded_nodes": [], "ranking": [], "note": note}
    best, count = (tries[0]["validation_figure"], 0), 1
    while count <= min(max_excluded, len(ranking)):
        nodes = [n for r in ranking[:count] for n in r["nodes"]]
        figure = round(goal_figure(quantize(nodes), goal, batch, fixed, layout), 6)
        tries.append({"excluded_tensors": count, "excluded_nodes": len(nodes), "validation_figure": figure})
        if figure > best[0]:  # strictly better: on a tie the fewer float layers stay
            best = (figure, count)
        if figure >= target or count == min(max_excluded, len(ranking)):
            break
        count = min(count * 2, max_excluded, len(ranking))
    kept = best[1]
    nodes = [n for r in ranking[:kept] for n in r["nodes"]]
    if tries[-1]["excluded_tensors"] != kept:  # the last try is on disk: write the best one again
        quantize(nodes)
    return {
        "tries": tries,
        "kept": kept,
        "excluded_nodes": nodes,
        "ranking": ranking[: max(kept, 8)],
        **({} if best[0] >= target else {"note": f"target {target} not reached; kept the best try ({best[0]})"}),
    }
