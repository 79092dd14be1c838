"""onnx_fp16: weights and arithmetic in float16, FP32 inputs/outputs kept.

The converter is ONNX Runtime's (`onnxruntime.transformers.float16`): unlike onnxconverter-common
1.16 it retypes the Cast nodes torch's exporter writes (`_to_copy` to float), whose FP16 form ORT
refuses to load on transformer graphs, and its default block list keeps the ops ORT has no FP16
CPU kernel for in FP32. On a CPU without native FP16 arithmetic ORT falls back to casts around FP32
kernels, so this variant is often slower than FP32 there; the report says so when it sees it.
"""

from __future__ import annotations

from pydantic import Field

from pipeline.core import onnx_files
from pipeline.core.onnx_files import graph_stats
from pipeline.optimize.passes.base import BuildContext, BuildResult, NoConfig, Pass
from pipeline.optimize.passes.onnxruntime.export import MODEL_FILE


class Float16Config(NoConfig):
    keep_io_types: bool = True
    op_block_list: list[str] | None = Field(
        default=None, description="op types kept in FP32 (None: the converter's default list)"
    )


class Float16(Pass):
    Config = Float16Config

    def run(self, ctx: BuildContext, config: Float16Config) -> BuildResult:
        import onnx
        from onnxruntime.transformers.float16 import convert_float_to_float16

        external = onnx_files.uses_external_data(ctx.exported_onnx)
        model = convert_float_to_float16(
            onnx.load(str(ctx.exported_onnx)),
            keep_io_types=config.keep_io_types,
            op_block_list=config.op_block_list,
            disable_shape_infer=external,  # ONNX shape inference cannot take a proto over 2 GB
        )
        onnx_files.save(model, ctx.out_dir / MODEL_FILE, external=external)
        stats = graph_stats(ctx.out_dir / MODEL_FILE)
        casts = sum(node.op_type == "Cast" for node in model.graph.node)
        return BuildResult(MODEL_FILE, {"nodes": stats["nodes"], "cast_nodes": casts, "converter": "onnxruntime"})
