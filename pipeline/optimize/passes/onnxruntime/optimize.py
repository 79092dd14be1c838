"""onnx_opt: ONNX Runtime's graph optimizations applied offline and saved, plus onnxslim.

Saving the optimized graph moves the optimization cost out of every session start (load_ms).
`extended` is the highest level whose output stays portable; `all` adds layout transforms
specific to the CPU it ran on (ORT's docs advise against saving those for other machines).

Transformers (pipeline.prepare.family) first go through ONNX Runtime's transformer optimizer, which fuses
attention, embedding + layer norm, skip + layer norm and Gelu into ORT's contrib operators: the
graph ORT's own transformer recipes (and Olive's) quantize.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pipeline.core import onnx_files
from pipeline.core.errors import first_line
from pipeline.core.onnx_files import graph_stats
from pipeline.core.records.source import Family
from pipeline.optimize.passes.base import BuildContext, BuildResult, NoConfig, Pass
from pipeline.optimize.passes.onnxruntime.export import MODEL_FILE


class OrtOptimizeConfig(NoConfig):
    level: Literal["basic", "extended", "all"] = "extended"
    slim: bool = True  # onnxslim first (not on transformers: it can hide the patterns the fusions match)
    # onnxruntime.transformers.optimizer model_type for transformer graphs; auto: the model's architecture
    transformer_type: str = "auto"


FUSED = "fused.onnx"  # scratch: the transformer optimizer's output


def optimizer_type(family: Family, configured: str = "auto") -> tuple[str, str]:
    """ORT transformer optimizer's model type and why: the configured one, else the architecture the
    model's config names when ORT has fusions for it (`vit`: its attention is not BERT's pattern),
    else `bert` (the encoder fusions most exported transformers match)."""
    from onnxruntime.transformers.optimizer import MODEL_TYPES

    if configured != "auto":
        return configured, "configured"
    architecture = family.architecture
    if architecture in MODEL_TYPES:
        return architecture, f"auto: the model's architecture ({architecture})"
    return "bert", f"auto: {f'no ORT fusions for {architecture}' if architecture else 'architecture unknown'}, bert"


def fuse_transformer(ctx: BuildContext, transformer_type: str = "auto") -> tuple[Path, dict[str, Any]]:
    """The export through onnxruntime.transformers.optimizer, saved in out_dir (scratch), and what it fused.

    num_heads / hidden_size come from the model's config or the catalog (pipeline.prepare.family); 0 lets
    ORT detect them, and when it cannot, attention stays unfused (recorded, not hidden)."""
    from onnxruntime.transformers.optimizer import optimize_model

    family = ctx.family
    transformer_type, why = optimizer_type(family, transformer_type)
    heads, hidden = family.num_heads or 0, family.hidden_size or 0
    optimized = optimize_model(
        str(ctx.exported_onnx), model_type=transformer_type, num_heads=heads, hidden_size=hidden, opt_level=0
    )
    path = ctx.out_dir / FUSED
    optimized.save_model_to_file(str(path), use_external_data_format=onnx_files.uses_external_data(ctx.exported_onnx))
    fused = {op: n for op, n in optimized.get_fused_operator_statistics().items() if n}
    return path, {
        "transformer_optimizer": {
            "model_type": transformer_type,
            "why": why,
            "num_heads": heads,
            "hidden_size": hidden,
        },
        "fused_ops": fused,
    }


def remove_scratch(ctx: BuildContext, *names: str) -> None:
    for name in names:
        for path in ctx.out_dir.glob(name + "*"):
            path.unlink()


class OrtOptimize(Pass):
    Config = OrtOptimizeConfig

    def run(self, ctx: BuildContext, config: OrtOptimizeConfig) -> BuildResult:
        import onnx
        import onnxruntime as ort

        before = graph_stats(ctx.exported_onnx)
        source = ctx.exported_onnx
        details: dict[str, Any] = {"nodes_before": before["nodes"], "level": config.level}
        external = onnx_files.uses_external_data(source)
        if ctx.transformer:
            source, fusion = fuse_transformer(ctx, config.transformer_type)
            details |= fusion | {"nodes_after_fusion": graph_stats(source)["nodes"], "slim": "not on transformers"}
        elif config.slim:
            import onnxslim

            slimmed = ctx.out_dir / "slim.onnx"
            try:  # a graph of ONNX-ML operators (XGBoost's TreeEnsemble) loses itself in onnxslim's shape pass
                graph, failed = onnxslim.slim(onnx.load(str(source))), ""
            except Exception as error:
                graph, failed = None, f"{type(error).__name__}: {first_line(error)}"
            if graph is None:
                details["slim"] = f"onnxslim could not slim this graph ({failed or 'it returned none'}): not used"
            else:
                onnx_files.save(graph, slimmed, external=external)
                after_slim = graph_stats(slimmed)["nodes"]
                details["nodes_after_slim"] = after_slim
                details["slim"] = "applied" if after_slim < before["nodes"] else "no gain, not used"
                if after_slim < before["nodes"]:
                    source = slimmed
        options = onnx_files.session_options()
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
        remove_scratch(ctx, "slim.onnx", FUSED)
        after = graph_stats(ctx.out_dir / MODEL_FILE)
        details |= {"nodes_after": after["nodes"], "top_ops": after["top_ops"]}
        return BuildResult(MODEL_FILE, details)
