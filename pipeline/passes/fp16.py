"""onnx_fp16: weights and arithmetic in float16 (onnxconverter-common), FP32 inputs/outputs kept.

On a CPU without native FP16 arithmetic ONNX Runtime falls back to casts around FP32 kernels, so
this variant is often slower than FP32 there; the report says so when it sees it.
"""

from __future__ import annotations

from pydantic import Field

from pipeline.passes.base import BuildContext, BuildResult, NoConfig, Pass
from pipeline.passes.onnx_export import MODEL_FILE, graph_stats


class Float16Config(NoConfig):
    keep_io_types: bool = True
    op_block_list: list[str] | None = Field(
        default=None, description="op types kept in FP32 (None: the library default)"
    )


class Float16(Pass):
    Config = Float16Config

    def run(self, ctx: BuildContext, config: Float16Config) -> BuildResult:
        import onnx
        from onnxconverter_common import float16

        model = float16.convert_float_to_float16(
            onnx.load(str(ctx.exported_onnx)),
            keep_io_types=config.keep_io_types,
            op_block_list=config.op_block_list,
        )
        onnx.save(model, str(ctx.out_dir / MODEL_FILE))
        stats = graph_stats(ctx.out_dir / MODEL_FILE)
        casts = sum(node.op_type == "Cast" for node in model.graph.node)
        return BuildResult(MODEL_FILE, {"nodes": stats["nodes"], "cast_nodes": casts})
