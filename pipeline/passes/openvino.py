"""OpenVINO IR variants (model.xml + model.bin), converted with openvino.convert_model.

Conversion starts from the checked ONNX export by default (`frontend: onnx`): that file passed the
parity check against the source, and the same path serves every source kind, ONNX files
included. `frontend: source` converts a PyTorch source module directly (OpenVINO's PyTorch front
end), for comparison.

The CPU plugin picks its own inference precision (bf16 on CPUs with AVX512-BF16 or AMX) unless
told otherwise, so `openvino_fp32` pins f32 by default and every variant records the precision
the plugin actually used.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import Field

from pipeline.data import Arrays, DataSet, padded_batches
from pipeline.errors import PipelineError
from pipeline.evaluate import predictions
from pipeline.passes.base import BuildContext, BuildResult, NoConfig, Pass

if TYPE_CHECKING:
    import openvino as ov

MODEL_FILE = "model.xml"
Precision = Literal["f32", "bf16", "f16", "auto"]


class OpenVinoConfig(NoConfig):
    frontend: Literal["onnx", "source"] = "onnx"
    inference_precision: Precision = "auto"


class Fp32Config(OpenVinoConfig):
    inference_precision: Precision = "f32"


class Int8Config(OpenVinoConfig):
    preset: Literal["performance", "mixed"] = "performance"
    subset_size: int = Field(default=300, ge=1)
    fast_bias_correction: bool = True


class Int8AccuracyConfig(Int8Config):
    max_drop: float = Field(default=0.01, gt=0)
    drop_type: Literal["absolute", "relative"] = "absolute"
    max_num_iterations: int = Field(default=500, ge=1)


def convert(ctx: BuildContext, frontend: str) -> ov.Model:
    """An ov.Model from the ONNX export, or from the PyTorch source module."""
    import openvino as ov

    if frontend == "onnx":
        return ov.convert_model(ctx.exported_onnx)
    if ctx.config.source != "torch":
        raise PipelineError(f"frontend 'source' converts PyTorch models; {ctx.model} is a {ctx.config.source} model")
    import torch

    from pipeline.passes.pytorch import source_module

    module = source_module(ctx)
    example = tuple(torch.from_numpy(v) for v in ctx.example().values())
    shapes = [
        ov.PartialShape([d if isinstance(d, int) else -1 for d in spec.shape]) for spec in ctx.config.inputs.values()
    ]
    model = ov.convert_model(module, example_input=example, input=shapes)
    for port, name in zip(model.inputs, ctx.config.inputs, strict=True):  # the spec's names, as in ONNX
        port.get_tensor().set_names({name})
    for port, name in zip(model.outputs, ctx.source_info["output_names"], strict=True):
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


def calibration_dataset(ctx: BuildContext) -> Any:
    """The calibration split one sample per item, as NNCF expects (a fixed batch's worth for
    models that fix their batch axis)."""
    import nncf

    return nncf.Dataset([chunk for chunk, _ in padded_batches(ctx.calibration().inputs, ctx.fixed_batch or 1)])


def quantize_kwargs(config: Int8Config) -> dict[str, Any]:
    import nncf

    return {
        "preset": nncf.QuantizationPreset.PERFORMANCE
        if config.preset == "performance"
        else nncf.QuantizationPreset.MIXED,
        "subset_size": config.subset_size,
        "fast_bias_correction": config.fast_bias_correction,
    }


class NncfInt8(Pass):
    """nncf.quantize: post-training INT8 (FakeQuantize) calibrated on the calibration split."""

    Config = Int8Config

    def run(self, ctx: BuildContext, config: Int8Config) -> BuildResult:
        import nncf

        dataset = calibration_dataset(ctx)
        quantized = nncf.quantize(convert(ctx, config.frontend), dataset, **quantize_kwargs(config))
        return save(ctx, quantized, compress_to_fp16=False, config=config, **_int8_details(ctx, config))


def _int8_details(ctx: BuildContext, config: Int8Config) -> dict[str, Any]:
    calibration = ctx.calibration()
    return {
        "preset": config.preset,
        "subset_size": min(config.subset_size, len(calibration)),
        "fast_bias_correction": config.fast_bias_correction,
        "calibration_origin": calibration.origin,
    }


class Validation:
    """NNCF's validation function over the eval split: the task metric, one value per sample.

    Targets are the labels when the model has a classification metric and labels, else the FP32
    source's own predictions (fidelity), as in the benchmark's accuracy block.
    """

    def __init__(self, ctx: BuildContext) -> None:
        reference: DataSet = ctx.reference()
        metric = ctx.config.metric
        primary = next(iter(reference.outputs.values()))
        targets = reference.labels if metric != "none" and reference.labels is not None else None
        self.metric = metric if targets is not None else "fidelity"
        if targets is None:
            targets = predictions(primary, metric)
        if targets is None:
            raise PipelineError(
                f"accuracy control needs a classification output or labels; {ctx.model} has metric 'none' "
                "and a single regression output"
            )
        self._metric_for_predictions = metric if metric != "none" else "accuracy"
        size = ctx.fixed_batch or 1
        targets = targets.reshape(len(targets), -1)[:, 0]
        self.items = [
            (chunk, targets[start : start + real])
            for start, (chunk, real) in zip(
                range(0, len(targets), size), padded_batches(reference.inputs, size), strict=True
            )
        ]

    def __call__(self, compiled: Any, items: Any) -> tuple[float, list[float]]:
        output = compiled.outputs[0]
        values = []
        for inputs, target in items:
            predicted = predictions(
                np.asarray(compiled(_by_port(compiled, inputs))[output]), self._metric_for_predictions
            )
            values.append(float(np.mean(predicted[: len(target)] == target)))
        return float(np.mean(values)), values


def _by_port(compiled: Any, inputs: Arrays) -> dict[int, np.ndarray]:
    return dict(enumerate(inputs.values()))


@contextmanager
def _capturing_restorer_report() -> Any:
    """NNCF logs, but does not return, which operations it reverted to float; keep its report."""
    from nncf.quantization.algorithms.accuracy_control.algorithm import QuantizationAccuracyRestorer

    captured: dict[str, Any] = {}
    original = QuantizationAccuracyRestorer._print_report

    def keep(report: Any, max_num_iterations: int) -> None:
        captured["report"] = report
        original(report, max_num_iterations)

    QuantizationAccuracyRestorer._print_report = staticmethod(keep)
    try:
        yield captured
    finally:
        QuantizationAccuracyRestorer._print_report = staticmethod(original)


class NncfInt8AccuracyControl(Pass):
    """nncf.quantize_with_accuracy_control: INT8, reverting operations to float until the
    eval-split metric drops by at most `max_drop`."""

    Config = Int8AccuracyConfig

    def run(self, ctx: BuildContext, config: Int8AccuracyConfig) -> BuildResult:
        import nncf
        import openvino as ov
        from nncf.parameters import DropType
        from nncf.quantization.advanced_parameters import AdvancedAccuracyRestorerParameters

        validation = Validation(ctx)
        model = convert(ctx, config.frontend)
        with _capturing_restorer_report() as captured:
            quantized = nncf.quantize_with_accuracy_control(
                model,
                calibration_dataset(ctx),
                nncf.Dataset(validation.items),
                validation_fn=validation,
                max_drop=config.max_drop,
                drop_type=DropType.ABSOLUTE if config.drop_type == "absolute" else DropType.RELATIVE,
                advanced_accuracy_restorer_parameters=AdvancedAccuracyRestorerParameters(
                    max_num_iterations=config.max_num_iterations
                ),
                **quantize_kwargs(config),
            )
        report = captured.get("report")
        core = ov.Core()
        fp32_value, _ = validation(
            core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"}), validation.items
        )
        int8_value, _ = validation(core.compile_model(quantized, "CPU"), validation.items)
        details = {
            **_int8_details(ctx, config),
            "max_drop": config.max_drop,
            "drop_type": config.drop_type,
            "validation_metric": validation.metric,
            "validation_samples": len(validation.items),
            "validation_fp32": fp32_value,
            "validation_int8": int8_value,
            # No report means the first quantization already met max_drop: nothing was reverted.
            "reverted_operations": len(report.reverted_operations) if report else 0,
            "quantized_operations": report.num_quantized_operations if report else None,
            "reached_max_drop": bool(report.reached_required_drop) if report else True,
        }
        return save(ctx, quantized, compress_to_fp16=False, config=config, **details)
