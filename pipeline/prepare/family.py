"""Which recipe a model gets: transformers (attention blocks) take the transformer recipes of
ONNX Runtime and NNCF, everything else the default ones.

`model_type: auto` reads the ONNX graph: fused attention operators, or the MatMul-Softmax-MatMul
of attention next to a layer normalization (LayerNormalization, or the ReduceMean pair older
exporters write). Conv layers without attention make a CNN; the rest is `other`.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

FUSED_ATTENTION = {"Attention", "MultiHeadAttention", "GroupQueryAttention", "PackedAttention"}
LAYER_NORMS = {"LayerNormalization", "SkipLayerNormalization", "SimplifiedLayerNormalization"}


def detect(ops: Counter[str]) -> tuple[str, str]:
    """(model type, the evidence) from a graph's operator counts."""
    fused = sum(ops[op] for op in FUSED_ATTENTION)
    if fused:
        return "transformer", f"{fused} fused attention operators"
    norms = sum(ops[op] for op in LAYER_NORMS) or ops["ReduceMean"] // 2
    if ops["Softmax"] and ops["MatMul"] >= 2 * ops["Softmax"] and norms:
        return "transformer", f"{ops['Softmax']} Softmax, {ops['MatMul']} MatMul, {norms} layer norms"
    if ops["Conv"]:
        return "cnn", f"{ops['Conv']} Conv, no attention"
    return "other", "no attention, no Conv"


def model_family(onnx_path: Path | None, declared: str, attention: dict[str, Any]) -> dict[str, Any]:
    """The `family` record of source.json: model type (declared or detected) and, for transformers,
    num_heads / hidden_size (declared in the catalog, else the model's config; 0: ORT detects them)
    and the architecture its config names (`bert`, `vit`: which of ORT's fusions apply), if it names one."""
    if declared != "auto":
        family = {"model_type": declared, "how": "declared (catalog model_type)"}
    elif onnx_path is None or not onnx_path.exists():
        family = {"model_type": "other", "how": "no ONNX graph to read"}
    else:
        import onnx

        graph = onnx.load(str(onnx_path), load_external_data=False).graph
        model_type, evidence = detect(Counter(node.op_type for node in graph.node))
        family = {"model_type": model_type, "how": f"detected: {evidence}"}
    if family["model_type"] == "transformer":
        family |= {"num_heads": attention.get("num_heads", 0), "hidden_size": attention.get("hidden_size", 0)}
        family |= {"architecture": attention["architecture"]} if "architecture" in attention else {}
    return family
