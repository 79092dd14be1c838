"""onnx_fp32: the checked export itself, so it is benchmarked exactly as converted."""

from __future__ import annotations

from pipeline.core import onnx_files
from pipeline.core.onnx_files import graph_stats
from pipeline.optimize.passes.base import BuildContext, BuildResult, NoConfig, Pass

MODEL_FILE = "model.onnx"


class AsExported(Pass):
    def run(self, ctx: BuildContext, config: NoConfig) -> BuildResult:
        onnx_files.copy(ctx.exported_onnx, ctx.out_dir / MODEL_FILE)  # with its external weights, if any
        return BuildResult(MODEL_FILE, {"nodes": graph_stats(ctx.out_dir / MODEL_FILE)["nodes"]})
