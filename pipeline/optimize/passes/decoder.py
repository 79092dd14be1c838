"""Text-generation variants: a causal LM with its KV cache, from the source's Hugging Face folder.

- lm_torch: the folder itself, run by transformers (the baseline).
- lm_onnx_*: onnxruntime-genai's model builder (what Olive's ModelBuilder pass runs) writes the
  ONNX decoder with past key/values inputs and present outputs, its genai_config.json, and for
  int4/int8 the weight-only MatMulNBits quantization (ORT's block-wise quantizer, RTN by default).
- lm_openvino_*: the PyTorch front end converts the model with explicit past key/values, which
  OpenVINO's MakeStateful transformation then turns into model state, with a `beam_idx` input
  reordering it, as optimum-intel exports decoders for openvino-genai; nncf.compress_weights
  compresses the weights to INT8 or INT4 (group-wise).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field

from pipeline.core import layout
from pipeline.core.errors import NotApplicable, PipelineError, one_line
from pipeline.optimize.passes.base import BuildContext, BuildResult, NoConfig, Pass

if TYPE_CHECKING:
    import openvino as ov

SIDE_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json")


def hf_folder(ctx: BuildContext) -> Path:
    return ctx.source_dir / layout.HF_DIR


def copy_side_files(ctx: BuildContext, out: Path) -> None:
    """The tokenizer and configs beside the model: predict decodes text with them."""
    for name in SIDE_FILES:
        if (hf_folder(ctx) / name).exists():
            shutil.copy2(hf_folder(ctx) / name, out / name)


class LmTorch(Pass):
    def run(self, ctx: BuildContext, config: NoConfig) -> BuildResult:
        shutil.copytree(hf_folder(ctx), ctx.out_dir / layout.HF_DIR)
        return BuildResult(layout.HF_DIR, {"source": "the Hugging Face folder as exported"})


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
            command = [sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", str(hf_folder(ctx)),
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


def convert_stateful(ctx: BuildContext) -> ov.Model:
    """The decoder as a stateful ov.Model: inputs input_ids, attention_mask, position_ids, beam_idx;
    output logits; the KV cache as model state (what openvino-genai's LLMPipeline runs)."""
    import openvino as ov
    import torch
    from transformers import AutoModelForCausalLM, DynamicCache

    model = AutoModelForCausalLM.from_pretrained(hf_folder(ctx), dtype=torch.float32, local_files_only=True).eval()
    family = ctx.family
    layers, kv_heads, head_dim = family.layers or 0, family.kv_heads or 0, family.head_dim or 0

    class WithPast(torch.nn.Module):
        """The past key/values as plain tensors in and out: what a tracer can follow."""

        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any, position_ids: Any, past: list[Any]) -> Any:
            cache = DynamicCache(config=model.config)
            for layer, (keys, values) in zip(cache.layers, zip(past[::2], past[1::2], strict=True), strict=True):
                layer.lazy_initialization(keys, values)
                layer.keys, layer.values = keys, values
            out = self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                             past_key_values=cache, use_cache=True)  # fmt: skip
            return (out.logits, *[t for layer in out.past_key_values.layers for t in (layer.keys, layer.values)])

    batch, past, new = 2, 3, 4  # none of size 1: the tracer keeps every axis dynamic
    example = {
        "input_ids": torch.ones(batch, new, dtype=torch.long),
        "attention_mask": torch.ones(batch, past + new, dtype=torch.long),
        "position_ids": torch.arange(past, past + new).expand(batch, new),
        "past": [torch.zeros(batch, kv_heads, past, head_dim) for _ in range(2 * layers)],
    }
    with torch.no_grad():
        converted = ov.convert_model(WithPast(), example_input=example)
    names = [f"past_key_values.{i}.{kind}" for i in range(layers) for kind in ("key", "value")]
    for port, name in zip(converted.inputs, ["input_ids", "attention_mask", "position_ids", *names], strict=True):
        port.get_tensor().set_names({name})
    presents = [name.replace("past_key_values", "present") for name in names]
    for port, name in zip(converted.outputs, ["logits", *presents], strict=True):
        port.get_tensor().set_names({name})
    make_stateful(converted, dict(zip(names, presents, strict=True)))
    return converted


def make_stateful(model: ov.Model, past_to_present: dict[str, str]) -> None:
    """KV-cache inputs and outputs become model state: a `beam_idx` input gathers the cache rows
    (beam search and batch reordering), the state starts empty at the input's batch size."""
    import numpy as np
    import openvino as ov
    from openvino import opset13
    from openvino._offline_transformations import apply_make_stateful_transformation

    batch = model.input("input_ids").get_partial_shape()[0]
    beam_idx = opset13.parameter(name="beam_idx", dtype=ov.Type.i32, shape=ov.PartialShape([batch]))
    beam_idx.output(0).get_tensor().add_names({"beam_idx"})
    model.add_parameters([beam_idx])
    for name in past_to_present:
        port = model.input(name)
        consumers = port.get_target_inputs()  # before the Gather becomes one
        gathered = opset13.gather(port, beam_idx, opset13.constant(0))
        for consumer in consumers:
            consumer.replace_source_output(gathered.output(0))
    model.validate_nodes_and_infer_types()
    apply_make_stateful_transformation(model, past_to_present)
    rows = opset13.gather(opset13.shape_of(model.input("input_ids"), output_type="i64"), opset13.constant([0]),
                          opset13.constant(0))  # fmt: skip
    for op in model.get_ops():
        if op.get_type_name() == "ReadValue":
            dims = [rows if axis == 0 else opset13.constant(np.array([d.min_length], dtype=np.int64))
                    for axis, d in enumerate(op.get_output_partial_shape(0))]  # fmt: skip
            zero = opset13.constant(0.0, dtype=op.get_output_element_type(0))
            op.set_arguments([opset13.broadcast(zero, opset13.concat(dims, 0))])
    model.validate_nodes_and_infer_types()


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
