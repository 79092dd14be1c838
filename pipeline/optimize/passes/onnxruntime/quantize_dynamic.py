"""onnx_int8_dynamic: onnxruntime.quantization.quantize_dynamic, INT8 weights, activations quantized
at run time; the recipe (transformers: the fused graph) is quantize_recipe's. A graph with nothing
the dynamic quantizer rewrites is not applicable, not an INT8-named copy of the float model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.core.errors import NotApplicable
from pipeline.core.records.source import Family
from pipeline.optimize.passes.base import BuildContext, BuildResult, Pass
from pipeline.optimize.passes.onnxruntime.export import MODEL_FILE
from pipeline.optimize.passes.onnxruntime.optimize import fuse_transformer
from pipeline.optimize.passes.onnxruntime.quantize_recipe import (
    DynamicConfig,
    finish,
    is_external,
    prepare,
    qtype,
    recipe,
    resolve_reduce_range,
    without_value_info,
)

NEEDS_WEIGHT = ("Gather", "EmbedLayerNormalization")  # quantized only when they read a float initializer
FOLLOWERS = ("Transpose",)  # quantized only after a quantized producer: nothing of its own


def dynamic_ops() -> list[str]:
    """The op types ORT's dynamic quantizer rewrites by default (its IntegerOps registry)."""
    from onnxruntime.quantization.registry import IntegerOpsRegistry

    return sorted(IntegerOpsRegistry)


def quantizable_nodes(path: Path, op_types: list[str]) -> int:
    """How many nodes of `op_types` the dynamic quantizer could rewrite: 0 means its output would be the
    float model under an INT8 name."""
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    weights = {i.name for i in graph.initializer if i.data_type == onnx.TensorProto.FLOAT}
    wanted = set(op_types) - set(FOLLOWERS)
    return sum(
        (n.op_type in wanted and (n.op_type not in NEEDS_WEIGHT or bool(weights & set(n.input))))
        or ("MatMul" in wanted and _matmul_gemm(n))
        for n in graph.node
    )


def _matmul_gemm(node: Any) -> bool:
    """A Gemm that ORT's dynamic quantizer rewrites as MatMul + Add (ONNXModel.replace_gemm_with_matmul)."""
    from onnx.helper import get_attribute_value

    attributes = {a.name: get_attribute_value(a) for a in node.attribute}
    return (
        node.op_type == "Gemm"
        and attributes.get("alpha", 1.0) == attributes.get("beta", 1.0) == 1.0
        and (not attributes.get("transA", 0))
    )


class DynamicInt8(Pass):
    """ORT's dynamic recipe is for transformers and RNNs: its ConvInteger has no fast CPU kernel (the foreign
    ResNet-50's dynamic INT8 read 5.4x FP32's p50 on amd-26-2-2c, the zoo's CNNs 1.7-3.2x), and ORT
    recommends static INT8 for convolutional models. So a CNN gets none unless `op_types` asks for it."""

    Config = DynamicConfig

    def not_for(self, config: DynamicConfig, family: Family) -> str | None:
        if family.model_type != "cnn" or config.op_types is not None:
            return None
        return (
            f"a convolutional model ({family.how or 'model_type: cnn'}): ORT's dynamic ConvInteger has no "
            "fast CPU kernel and ORT recommends static INT8 (onnx_int8_static) for CNNs; op_types: [Conv, MatMul] "
            "builds it anyway"
        )

    def run(self, ctx: BuildContext, config: DynamicConfig) -> BuildResult:
        from onnxruntime.quantization import quantize_dynamic

        used = recipe(ctx, config, static=False)
        ops = used.op_types or dynamic_ops()
        if not quantizable_nodes(ctx.exported_onnx, ops):
            wanted = ", ".join(sorted(set(ops) - set(FOLLOWERS)))
            raise NotApplicable(f"nothing to quantize dynamically: no {wanted} (a Gemm counts as MatMul) in the export")
        details: dict[str, Any] = {}
        if ctx.transformer:  # ORT's transformer recipe quantizes the fused graph, as it is (no pre-processing)
            fused, details = fuse_transformer(ctx)
            model, preprocess = without_value_info(ctx, fused), "off: the fused transformer graph is quantized"
        else:
            model, preprocess = prepare(ctx, config)
        quantize_dynamic(
            model,
            str(ctx.out_dir / MODEL_FILE),
            op_types_to_quantize=used.op_types,
            nodes_to_exclude=used.nodes_to_exclude,
            per_channel=used.per_channel,
            reduce_range=resolve_reduce_range(config.reduce_range),
            weight_type=qtype(config.weight_type),
            extra_options=used.extra_options,
            use_external_data_format=is_external(ctx),
        )
        return finish(ctx, config, used, preprocess, details)
