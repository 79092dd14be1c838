"""lm_openvino_fp32, _fp16, _int8 and _int4: the decoder as a stateful OpenVINO IR (openvino.stateful) with
its tokenizer and configs, run by openvino-genai.

nncf.compress_weights compresses the weights to INT8 or INT4 (group-wise); the CPU plugin's compute and
KV-cache precision are knobs of every one."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field

from pipeline.core import layout
from pipeline.core.errors import PipelineError, one_line
from pipeline.optimize.passes.base import BuildContext, BuildResult, NoConfig, Pass
from pipeline.optimize.passes.openvino.stateful import convert_stateful

if TYPE_CHECKING:
    import openvino as ov

SIDE_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json")


def copy_side_files(ctx: BuildContext, out: Path) -> None:
    """The tokenizer and configs beside the model: predict decodes text with them."""
    for name in SIDE_FILES:
        if (ctx.hf_folder / name).exists():
            shutil.copy2(ctx.hf_folder / name, out / name)


class OvDecoderConfig(NoConfig):
    # the CPU plugin's compute and KV-cache precision; auto: its own choice (bf16 compute on
    # AVX512-BF16/AMX CPUs, a u8-quantized KV cache)
    inference_precision: Literal["f32", "bf16", "f16", "auto"] = "auto"
    kv_cache_precision: Literal["f32", "bf16", "f16", "u8", "auto"] = "auto"


class OvFp32Config(OvDecoderConfig):
    inference_precision: Literal["f32", "bf16", "f16", "auto"] = "f32"
    kv_cache_precision: Literal["f32", "bf16", "f16", "u8", "auto"] = "f32"


class OvInt8Config(OvDecoderConfig):
    """nncf.compress_weights to INT8, per output channel, data-free (INT8 takes no other option)."""

    mode: Literal["int8_asym", "int8_sym"] = "int8_asym"


class OvInt4Config(OvDecoderConfig):
    """nncf.compress_weights to INT4: `ratio` of the weights (by size) in `mode` and the rest in
    `backup_mode`, `group_size` weights per scale (-1: per output channel), data-free; without
    `all_layers` the embeddings and the LM head stay 8-bit, as NNCF recommends."""

    mode: Literal["int4_sym", "int4_asym"] = "int4_sym"
    group_size: int = Field(default=64, ge=-1)
    ratio: float = Field(default=1.0, gt=0, le=1)
    backup_mode: Literal["int8_asym", "int8_sym", "none"] = "int8_asym"
    all_layers: bool = False


class OvDecoder(Pass):
    Config = OvDecoderConfig
    fp16_weights: ClassVar[bool] = False

    def run(self, ctx: BuildContext, config: OvDecoderConfig) -> BuildResult:
        import openvino as ov

        model = convert_stateful(ctx)
        details = self.compress(model, config) if hasattr(config, "mode") else {}
        ov.save_model(model, ctx.out_dir / layout.OV_GENAI_MODEL, compress_to_fp16=self.fp16_weights)
        copy_side_files(ctx, ctx.out_dir)
        runtime = {"inference_precision": config.inference_precision, "kv_cache_precision": config.kv_cache_precision}
        return BuildResult(".", {"stateful": True, **details}, runtime)

    def compress(self, model: ov.Model, config: OvInt8Config | OvInt4Config) -> dict[str, Any]:
        import nncf

        knobs = config.model_dump(exclude={"inference_precision", "kv_cache_precision"})
        kwargs = knobs | {"mode": nncf.CompressWeightsMode(config.mode)}
        if "backup_mode" in knobs:
            kwargs["backup_mode"] = nncf.BackupMode(config.backup_mode)
        try:
            nncf.compress_weights(model, **kwargs)
        except nncf.errors.InvalidGroupSizeError as error:
            raise PipelineError(
                f"nncf.compress_weights: {one_line(error)} (group_size {knobs['group_size']})"
            ) from None
        return {"compress_weights": knobs}


class OvFp32(OvDecoder):
    Config = OvFp32Config


class OvFp16(OvDecoder):
    fp16_weights = True


class OvInt8(OvDecoder):
    Config = OvInt8Config


class OvInt4(OvDecoder):
    Config = OvInt4Config
