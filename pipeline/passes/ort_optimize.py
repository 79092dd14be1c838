"""onnx_opt: ONNX Runtime's graph optimizations applied offline and saved, plus onnxslim.

Saving the optimized graph moves the optimization cost out of every session start (load_ms).
`extended` is the highest level whose output stays portable; `all` adds layout transforms
specific to the CPU it ran on (ORT's docs advise against saving those for other machines).
"""

from __future__ import annotations

from typing import Literal

from pipeline.passes.base import BuildContext, BuildResult, NoConfig, Pass
from pipeline.passes.onnx_export import MODEL_FILE, graph_stats


class OrtOptimizeConfig(NoConfig):
    level: Literal["basic", "extended", "all"] = "extended"
    slim: bool = True


class OrtOptimize(Pass):
    Config = OrtOptimizeConfig

    def run(self, ctx: BuildContext, config: OrtOptimizeConfig) -> BuildResult:
        import onnx
        import onnxruntime as ort

        before = graph_stats(ctx.exported_onnx)
        source = ctx.exported_onnx
        details = {"nodes_before": before["nodes"], "level": config.level}
        if config.slim:
            import onnxslim

            slimmed = ctx.out_dir / "slim.onnx"
            onnx.save(onnxslim.slim(onnx.load(str(source))), str(slimmed))
            after_slim = graph_stats(slimmed)["nodes"]
            details["nodes_after_slim"] = after_slim
            details["slim"] = "applied" if after_slim < before["nodes"] else "no gain, not used"
            if after_slim < before["nodes"]:
                source = slimmed
        options = ort.SessionOptions()
        options.graph_optimization_level = {
            "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
            "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
            "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
        }[config.level]
        options.optimized_model_filepath = str(ctx.out_dir / MODEL_FILE)
        ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
        (ctx.out_dir / "slim.onnx").unlink(missing_ok=True)
        after = graph_stats(ctx.out_dir / MODEL_FILE)
        details |= {"nodes_after": after["nodes"], "top_ops": after["top_ops"]}
        return BuildResult(MODEL_FILE, details)
