"""lm_onnx_fp32, lm_onnx_int8 and lm_onnx_int4: the decoder with its KV cache as ONNX, written by
onnxruntime-genai's model builder from the source's Hugging Face folder and run by onnxruntime-genai.

The builder (what Olive's ModelBuilder pass runs) writes the ONNX decoder with past key/values inputs and
present outputs, its genai_config.json and tokenizer files, and for int4/int8 the weight-only MatMulNBits
quantization (ORT's block-wise quantizer, RTN by default)."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from typing import ClassVar, Literal

from pipeline.core.errors import NotApplicable, PipelineError
from pipeline.optimize.passes.base import BuildContext, BuildResult, NoConfig, Pass


class GenaiConfig(NoConfig):
    block_size: Literal[16, 32, 64, 128, 256] = 32  # int4/int8: weights per quantization block
    accuracy_level: Literal[0, 1, 2, 3, 4] = 4  # MatMulNBits activations: 4 = int8, 1 = fp32 (CPU default 4)
    algo_config: Literal["default", "rtn", "k_quant"] = "default"
    is_symmetric: bool = True


class GenaiBuilder(Pass):
    """onnxruntime-genai's model builder, run as its command line in a child process."""

    Config = GenaiConfig
    precision: ClassVar[str]

    def run(self, ctx: BuildContext, config: GenaiConfig) -> BuildResult:
        extra = (
            [f"{k}={v}".lower() if isinstance(v, bool) else f"{k}={v}" for k, v in config.model_dump().items()]
            if self.precision in ("int4", "int8")
            else []
        )
        with tempfile.TemporaryDirectory(dir=ctx.out_dir.parent) as cache:
            command = [sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", str(ctx.hf_folder),
                       "-o", str(ctx.out_dir), "-p", self.precision, "-e", "cpu", "-c", cache,
                       *(["--extra_options", *extra] if extra else [])]  # fmt: skip
            done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            tail = [line for line in done.stderr.splitlines() if line.strip()][-1:] or ["(no message)"]
            message = f"onnxruntime-genai's model builder: {tail[0]}"
            if "not currently supported" in message:
                raise NotApplicable(f"{message} (its supported architectures: onnxruntime-genai's builder.py)")
            raise PipelineError(message)
        return BuildResult(
            ".",
            {"builder": "onnxruntime_genai.models.builder", "precision": self.precision, "extra_options": extra},
        )


class GenaiFp32(GenaiBuilder):
    Config = NoConfig
    precision = "fp32"


class GenaiInt8(GenaiBuilder):
    precision = "int8"


class GenaiInt4(GenaiBuilder):
    precision = "int4"
