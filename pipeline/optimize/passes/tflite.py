"""tflite: the .tflite file as it ships, the baseline of a TFLite source: what its users run today (the
LiteRT interpreter, XNNPACK), so every speed-up is stated against it, and where it is the fastest faithful
variant the deployment is the file itself, with its runtime."""

from __future__ import annotations

import shutil

from pipeline.core.layout import model_dir
from pipeline.optimize.passes.base import BuildContext, BuildResult, NoConfig, Pass

MODEL_FILE = "model.tflite"


class AsShipped(Pass):
    def run(self, ctx: BuildContext, config: NoConfig) -> BuildResult:
        from pipeline.runtimes.litert import interpreter, quantized, signature_tensors

        shutil.copy2(model_dir(ctx.model, ctx.root) / (ctx.config.file or ""), ctx.out_dir / MODEL_FILE)
        inputs, outputs = signature_tensors(interpreter(ctx.out_dir / MODEL_FILE))
        return BuildResult(
            MODEL_FILE,
            {"source": f"copied from {ctx.config.file}", "full_integer": quantized(inputs + outputs)},
            runtime_config={"output_names": ctx.source_info.output_names},
        )
