"""openvino_fp32 and openvino_fp16: OpenVINO IR (model.xml + model.bin) from openvino.convert_model,
the conversion every OpenVINO variant starts from.

Conversion starts from the checked ONNX export by default (`frontend: onnx`): that file passed the
parity check against the source, and the same path serves every source kind, ONNX files
included. `frontend: source` converts a PyTorch source module directly (OpenVINO's PyTorch front
end), for comparison.

The CPU plugin picks its own inference precision (bf16 on CPUs with AVX512-BF16 or AMX) unless
told otherwise, so `openvino_fp32` pins f32 by default and every variant records the precision
the plugin actually used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pipeline.core.errors import PipelineError
from pipeline.optimize.passes.base import BuildContext, BuildResult, NoConfig, Pass

if TYPE_CHECKING:
    import openvino as ov

MODEL_FILE = "model.xml"
Precision = Literal["f32", "bf16", "f16", "auto"]


class OpenVinoConfig(NoConfig):
    frontend: Literal["onnx", "source"] = "onnx"
    inference_precision: Precision = "auto"


class Fp32Config(OpenVinoConfig):
    inference_precision: Precision = "f32"


def convert(ctx: BuildContext, frontend: str) -> ov.Model:
    """An ov.Model from the ONNX export, or from the PyTorch source module."""
    import openvino as ov

    if frontend == "onnx":
        return ov.convert_model(ctx.exported_onnx)
    if ctx.config.source != "torch":
        raise PipelineError(f"frontend 'source' converts PyTorch models; {ctx.model} is a {ctx.config.source} model")
    import torch

    from pipeline.optimize.passes.pytorch import source_module

    module = source_module(ctx)
    example = tuple(torch.from_numpy(v) for v in ctx.example().values())
    shapes = [
        ov.PartialShape([d if isinstance(d, int) else -1 for d in spec.shape]) for spec in ctx.config.inputs.values()
    ]
    model = ov.convert_model(module, example_input=example, input=shapes)
    for port, name in zip(model.inputs, ctx.config.inputs, strict=True):  # the spec's names, as in ONNX
        port.get_tensor().set_names({name})
    for port, name in zip(model.outputs, ctx.source_info.output_names, strict=True):
        port.get_tensor().set_names({name})
    return model


def save(
    ctx: BuildContext, model: ov.Model, compress_to_fp16: bool, config: OpenVinoConfig, **details: Any
) -> BuildResult:
    import openvino as ov

    ov.save_model(model, str(ctx.out_dir / MODEL_FILE), compress_to_fp16=compress_to_fp16)
    ops = [op.get_type_name() for op in model.get_ops()]
    return BuildResult(
        MODEL_FILE,
        {
            "frontend": config.frontend,
            "compress_to_fp16": compress_to_fp16,
            "ops": len(ops),
            "fake_quantize_ops": ops.count("FakeQuantize"),
            **details,
        },
        runtime_config={"inference_precision": config.inference_precision},
    )


class OpenVinoFp32(Pass):
    Config = Fp32Config

    def run(self, ctx: BuildContext, config: Fp32Config) -> BuildResult:
        return save(ctx, convert(ctx, config.frontend), compress_to_fp16=False, config=config)


class OpenVinoFp16(Pass):
    Config = OpenVinoConfig

    def run(self, ctx: BuildContext, config: OpenVinoConfig) -> BuildResult:
        return save(ctx, convert(ctx, config.frontend), compress_to_fp16=True, config=config)
