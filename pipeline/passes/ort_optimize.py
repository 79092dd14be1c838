"""onnx_opt: ONNX Runtime's graph optimizations applied offline and saved, plus onnxslim.

Saving the optimized graph moves the optimization cost out of every session start (load_ms).
`extended` is the highest level whose output stays portable; `all` adds layout transforms
specific to the CPU it ran on (ORT's docs advise against saving those for other machines).
"""

from __future__ import annotations

from typing import Literal

from pipeline import onnx_files
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
        external = onnx_files.uses_external_data(source)
        if config.slim:
            import onnxslim

            slimmed = ctx.out_dir / "slim.onnx"
            onnx_files.save(onnxslim.slim(onnx.load(str(source))), slimmed, external=external)
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
        if external:  # large weights stay in a side file (ORT writes them there when told to)
            options.add_session_config_entry(
                "session.optimized_model_external_initializers_file_name", MODEL_FILE + ".data"
            )
            options.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1024")
        ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
        for scratch in ctx.out_dir.glob("slim.onnx*"):
            scratch.unlink()
        after = graph_stats(ctx.out_dir / MODEL_FILE)
        details |= {"nodes_after": after["nodes"], "top_ops": after["top_ops"]}
        return BuildResult(MODEL_FILE, details)
