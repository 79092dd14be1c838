"""Which recipe a model gets: transformers (attention blocks) take the transformer recipes of
ONNX Runtime and NNCF, everything else the default ones.

`model_type: auto` reads the ONNX graph: fused attention operators, or the MatMul-Softmax-MatMul
of attention next to a layer normalization (LayerNormalization, or the ReduceMean pair older
exporters write). A graph without attention is a CNN when its convolutions do most of its work: the
multiply-accumulates of its Conv nodes against those of its MatMul/Gemm nodes, from the shapes ONNX's
shape inference gives at the export's dims (a model with one small Conv in front of two large MatMuls is
no CNN; counting Conv nodes said it was). The rest is `other`.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from pipeline.core.records.source import Family
from pipeline.core.work import count_work

FUSED_ATTENTION = {"Attention", "MultiHeadAttention", "GroupQueryAttention", "PackedAttention"}
LAYER_NORMS = {"LayerNormalization", "SkipLayerNormalization", "SimplifiedLayerNormalization"}


CNN_SHARE = 0.5  # a graph whose Conv nodes do at least this share of the multiply-accumulates is a CNN


def detect(ops: Counter[str], conv_share: float | None = None) -> tuple[str, str]:
    """(model type, the evidence) from a graph's operator counts and, where known, the share of its
    multiply-accumulates that its Conv nodes do."""
    fused = sum(ops[op] for op in FUSED_ATTENTION)
    if fused:
        return "transformer", f"{fused} fused attention operators"
    norms = sum(ops[op] for op in LAYER_NORMS) or ops["ReduceMean"] // 2
    if ops["Softmax"] and ops["MatMul"] >= 2 * ops["Softmax"] and norms:
        return "transformer", f"{ops['Softmax']} Softmax, {ops['MatMul']} MatMul, {norms} layer norms"
    if ops["Conv"] and (conv_share is None or conv_share >= CNN_SHARE):
        share = "" if conv_share is None else f" doing {conv_share:.0%} of the multiply-accumulates"
        return "cnn", f"{ops['Conv']} Conv{share}, no attention"
    if ops["Conv"]:
        return (
            "other",
            f"{ops['Conv']} Conv doing only {conv_share:.0%} of the multiply-accumulates (MatMul/Gemm the rest)",
        )
    return "other", "no attention, no Conv"


def conv_share(model: Any, shapes: dict[str, tuple[int, ...]]) -> float | None:
    """The share of the graph's multiply-accumulates done by Conv nodes (against MatMul and Gemm), with
    each input at the shape in `shapes` (batch 1, the export's dims); None when shape inference cannot
    tell the sizes (a graph it does not follow)."""
    work = count_work(model, shapes)
    return work.conv_macs / work.macs if work and work.macs else None


def model_family(
    onnx_path: Path | None, declared: str, attention: dict[str, Any], shapes: dict[str, tuple[int, ...]] | None = None
) -> Family:
    """The `family` record of source.json: model type (declared, or detected with the inputs at `shapes`)
    and, for transformers, num_heads / hidden_size (declared in the catalog, else the model's config; 0: ORT
    detects them) and the architecture its config names (`bert`, `vit`: which of ORT's fusions apply), if any."""
    if declared != "auto":
        family = Family(model_type=declared, how="declared (catalog model_type)")
    elif onnx_path is None or not onnx_path.exists():
        family = Family(model_type="other", how="no ONNX graph to read")
    else:
        import onnx

        model = onnx.load(str(onnx_path), load_external_data=False)
        ops = Counter(node.op_type for node in model.graph.node)
        share = conv_share(model, shapes or {}) if ops["Conv"] else None
        model_type, evidence = detect(ops, share)
        family = Family(model_type=model_type, how=f"detected: {evidence}")
    if family.model_type == "transformer":
        known = {key: value for key, value in attention.items() if value is not None}  # 0: ORT detects them
        family = family.model_copy(update={"num_heads": 0, "hidden_size": 0} | known)
    return family
