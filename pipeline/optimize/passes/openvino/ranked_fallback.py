"""openvino_int8_acc's path when NNCF's accuracy control itself fails (rescue nncf_accuracy_control_crash).

ONNX Runtime's sensitivity ranking (pipeline.optimize.passes.onnxruntime.sensitivity: each quantized
activation's SQNR on a few validation rows, measured on the exported ONNX) names the operations to keep
in float; nncf.quantize runs again with the consumers of the 1, 2, 4, ... worst activations in its
IgnoredScope, each try judged by the same Validation (the validation rows, never the scoring rows),
until one keeps max_drop, as the ORT search does. The best try is kept, reached or not, and the record
says which.

OpenVINO's ONNX front end names each operation after its ONNX node (the pieces of a decomposed node
'NODE/...'), or after the tensor it writes when that tensor is a graph output; a ranked node is found
by either. A model converted from another front
end (`frontend: source`) has other names: none is found, and the record says so.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.optimize.passes.base import BuildContext

if TYPE_CHECKING:
    import openvino as ov

    from pipeline.optimize.passes.openvino.accuracy_search import Int8AccuracyConfig, Validation

MAX_EXCLUDED = 16  # ranked activations kept in float at most, as the ORT search's max_excluded


def ranking(ctx: BuildContext, rows: Any) -> list[dict[str, Any]]:
    """The exported ONNX's quantized activations, worst SQNR first, each with its consumer nodes: ORT's
    static QDQ quantization calibrated on the calibration split, compared on `rows` (validation rows)."""
    from onnxruntime.quantization import QuantFormat, quantize_static

    from pipeline.optimize.passes.onnxruntime.quantize_static import CalibrationReader
    from pipeline.optimize.passes.onnxruntime.sensitivity import ranked_activations

    calibration = ctx.calibration()
    with tempfile.TemporaryDirectory(prefix="ranking-") as scratch:
        qdq = Path(scratch) / "qdq.onnx"
        reader = CalibrationReader(calibration.inputs, ctx.max_batch(32, len(calibration)), ctx.model_inputs)
        quantize_static(str(ctx.exported_onnx), str(qdq), reader, quant_format=QuantFormat.QDQ, per_channel=True)
        batch = ctx.max_batch(32, len(rows))
        return ranked_activations(ctx.exported_onnx, qdq, rows.inputs, batch, None, ctx.model_inputs)


def operation_names(ctx: BuildContext, model: ov.Model) -> dict[str, list[str]]:
    """Each ONNX node's OpenVINO operations (friendly names), where the front end kept a trace of it: the
    operation named after the node or the tensor it writes, and those it was decomposed into (a Gemm's
    MatMul is 'NODE/WithoutBiases')."""
    import onnx

    ops = [op for op in model.get_ops() if op.get_type_name() not in ("Constant", "Parameter", "Result")]
    by_tensor = {name: op.get_friendly_name() for op in ops for out in op.outputs() for name in out.get_names()}
    found: dict[str, list[str]] = {}
    for node in onnx.load(str(ctx.exported_onnx), load_external_data=False).graph.node:
        named = {op.get_friendly_name() for op in ops if op.get_friendly_name().split("/")[0] == node.name}
        named |= {by_tensor[o] for o in node.output if o in by_tensor}
        if named:
            found[node.name] = sorted(named)
    return found


def ranked_search(
    ctx: BuildContext, config: Int8AccuracyConfig, model: ov.Model, validation: Validation
) -> tuple[ov.Model, dict[str, Any]]:
    """nncf.quantize with the ranked operations in float, 0, 1, 2, 4, ... activations' worth: the best try
    and what the record says of the search."""
    import nncf
    import openvino as ov

    from pipeline.optimize.passes.onnxruntime.sensitivity import SENSITIVITY_ROWS
    from pipeline.optimize.passes.openvino.quantize import calibration_dataset, quantize_kwargs

    ranked = ranking(ctx, validation.goal.rows.head(SENSITIVITY_ROWS))
    names = operation_names(ctx, model)
    core, dataset = ov.Core(), calibration_dataset(ctx, model)
    kwargs, scope = quantize_kwargs(ctx, config, model), config.ignored_scope
    fp32, _ = validation(core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"}), validation.items)
    target = fp32 - config.max_drop if config.drop_type == "absolute" else fp32 * (1 - config.max_drop)
    tries: list[dict[str, Any]] = []
    best: tuple[float, int, Any, list[str]] | None = None
    count, most = 0, min(MAX_EXCLUDED, len(ranked))
    while True:
        kept = sorted({op for r in ranked[:count] for n in r["nodes"] for op in names.get(n, [])})
        ignored = nncf.IgnoredScope(names=[*scope.names, *kept], types=scope.types, patterns=scope.patterns,
                                    validate=False)  # fmt: skip
        quantized = nncf.quantize(model, dataset, **kwargs | {"ignored_scope": ignored})
        value, _ = validation(core.compile_model(quantized, "CPU"), validation.items)
        tries.append({"excluded_tensors": count, "float_operations": len(kept), "validation_figure": round(value, 6)})
        if best is None or value > best[0]:  # strictly better: on a tie the fewer float operations stay
            best = (value, count, quantized, kept)
        if value >= target or count >= most:
            break
        count = min(max(1, 2 * count), most)
    value, count, quantized, kept = best
    return quantized, {
        "searched_by": "onnxruntime sensitivity ranking + nncf.quantize IgnoredScope",
        "validation_fp32": fp32,
        "validation_int8": value,
        "reached_max_drop": bool(value >= target),
        "tries": tries,
        "float_operations": kept,
        "ranked_activations": len(ranked),
        "ranked_nodes_found": sum(n in names for r in ranked[:most] for n in r["nodes"]),
        "ranked_nodes": sum(len(r["nodes"]) for r in ranked[:most]),
    }
