"""openvino_fp32 and openvino_fp16: OpenVINO IR (model.xml + model.bin) from openvino.convert_model,
the conversion every OpenVINO variant starts from.

Conversion starts from the checked ONNX export by default (`frontend: auto`): that file passed the
parity check against the source, and the same path serves every source kind, ONNX files
included; but a TFLite file is read by OpenVINO's own TFLite front end, as it ships (tf2onnx's NHWC
graph keeps transposes a direct reading does not need). `frontend: source` converts a PyTorch source
module or a TFLite file directly, `frontend: onnx` always takes the export; the build record says which.

The CPU plugin picks its own inference precision (bf16 on CPUs with AVX512-BF16 or AMX) unless
told otherwise, so `openvino_fp32` pins f32 by default and every variant records the precision
the plugin actually used.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from pipeline.core import onnx_files, rescues
from pipeline.core.errors import PipelineError
from pipeline.optimize.passes.base import BuildContext, BuildResult, NoConfig, Pass

if TYPE_CHECKING:
    import openvino as ov

MODEL_FILE = "model.xml"
RESCUE_INFO = "pipeline_rescue"  # the rt_info key under which convert's rescue travels to save()
Precision = Literal["f32", "bf16", "f16", "auto"]


DIRECT = {"tflite"}  # the source kinds `frontend: auto` converts from the user's own file


class OpenVinoConfig(NoConfig):
    frontend: Literal["auto", "onnx", "source"] = "auto"
    inference_precision: Precision = "auto"


class Fp32Config(OpenVinoConfig):
    inference_precision: Precision = "f32"


def frontend_of(source: str, frontend: str) -> str:
    """The front end `frontend` means for a model of kind `source`: `auto` is `source` for the kinds OpenVINO
    reads as they ship (DIRECT), `onnx` for the others."""
    if frontend == "auto":
        return "source" if source in DIRECT else "onnx"
    return frontend


class ConvertsSource(Pass):
    """An OpenVINO pass (convert() is where each starts): it needs the ONNX export only where it converts from
    it, so a TFLite file that tf2onnx cannot convert still gets its OpenVINO variants, from the file itself."""

    def reads_export(self, config: OpenVinoConfig, source: str) -> bool:
        return frontend_of(source, config.frontend) == "onnx"


def convert(ctx: BuildContext, frontend: str) -> ov.Model:
    """An ov.Model from the ONNX export, the PyTorch source module or the TFLite file (frontend_of)."""
    import openvino as ov

    frontend = frontend_of(ctx.config.source, frontend)
    if frontend == "onnx":
        try:
            return ov.convert_model(ctx.exported_onnx)
        except Exception as error:
            values = known_scalars(ctx)
            rescue = rescues.find("if_on_known_scalar", error) if values else None
            if rescue is None:
                raise
            with tempfile.TemporaryDirectory(prefix="specialised-") as scratch:
                folded = Path(scratch) / "model.onnx"
                onnx_files.save(specialised(ctx.exported_onnx, values), folded)
                model = ov.convert_model(folded)
            record = rescue.record(error, specialised_to={name: value.item() for name, value in values.items()})
            model.set_rt_info(json.dumps(record), [RESCUE_INFO])  # save() records it (NNCF keeps a model's rt_info)
            return model
    if (reader := SOURCE_READERS.get(ctx.config.source)) is None:
        raise PipelineError(f"frontend 'source' converts {' and '.join(SOURCE_READERS)} models; {ctx.model} is a "
                            f"{ctx.config.source} model")  # fmt: skip
    return reader(ctx)


def from_torch(ctx: BuildContext) -> ov.Model:
    """The PyTorch source module traced by OpenVINO's PyTorch front end, its ports given the spec's names."""
    import openvino as ov
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


def from_tflite(ctx: BuildContext) -> ov.Model:
    """The .tflite file read by OpenVINO's TFLite front end, its ports given the spec's names."""
    import openvino as ov

    from pipeline.core.layout import model_dir
    from pipeline.runtimes.litert import interpreter, signature_tensors, spec_names

    path = model_dir(ctx.model, ctx.root) / (ctx.config.file or "")
    names = spec_names(*signature_tensors(interpreter(path)), ctx.source_info.output_names)
    model = ov.convert_model(str(path))
    for port in [*model.inputs, *model.outputs]:
        port.get_tensor().set_names({names[port.get_any_name()]})
    return model


def known_scalars(ctx: BuildContext) -> dict[str, np.ndarray]:
    """The scalar inputs (`shape: []`) and the one value each is declared to take on every call."""
    found = {}
    for name, spec in ctx.config.inputs.items():
        if not spec.shape and spec.value is not None:
            found[name] = np.asarray(spec.value, dtype=spec.dtype)
    return found


def specialised(path: Path, values: dict[str, np.ndarray]) -> Any:
    """The ONNX model at `path` with each input in `values` replaced by a Constant of that value, then
    onnxscript's optimizer (constant folding: an If on a known condition becomes the branch it takes)."""
    import onnx
    import onnxscript.optimizer

    model = onnx.load(str(path))
    graph = model.graph
    for name, value in values.items():
        graph.input.remove(next(i for i in graph.input if i.name == name))
        graph.node.insert(0, onnx.helper.make_node("Constant", [], [name], value=onnx.numpy_helper.from_array(value)))
    return onnxscript.optimizer.optimize(model)


def save(
    ctx: BuildContext,
    model: ov.Model,
    compress_to_fp16: bool,
    config: OpenVinoConfig,
    rescued: tuple[dict[str, Any], ...] = (),
    **details: Any,
) -> BuildResult:
    """Write the IR; `rescued`: the rescues the pass used, to which convert's own is added."""
    import openvino as ov

    if model.has_rt_info([RESCUE_INFO]):  # convert's rescue: the model is specialised to known inputs
        rescued = (*rescued, json.loads(model.get_rt_info([RESCUE_INFO]).astype(str)))

    ov.save_model(model, str(ctx.out_dir / MODEL_FILE), compress_to_fp16=compress_to_fp16)
    ops = [op.get_type_name() for op in model.get_ops()]
    return BuildResult(
        MODEL_FILE,
        {
            "frontend": frontend_of(ctx.config.source, config.frontend),
            "compress_to_fp16": compress_to_fp16,
            "ops": len(ops),
            "fake_quantize_ops": ops.count("FakeQuantize"),
            **details,
        },
        runtime_config={"inference_precision": config.inference_precision},
        rescues=list(rescued),
    )


class OpenVinoFp32(ConvertsSource):
    Config = Fp32Config

    def run(self, ctx: BuildContext, config: Fp32Config) -> BuildResult:
        return save(ctx, convert(ctx, config.frontend), compress_to_fp16=False, config=config)


class OpenVinoFp16(ConvertsSource):
    Config = OpenVinoConfig

    def run(self, ctx: BuildContext, config: OpenVinoConfig) -> BuildResult:
        return save(ctx, convert(ctx, config.frontend), compress_to_fp16=True, config=config)


# The source kinds `frontend: source` reads with OpenVINO's own front end, and how (DIRECT: those `auto` picks)
SOURCE_READERS: dict[str, Callable[[BuildContext], ov.Model]] = {"tflite": from_tflite, "torch": from_torch}
