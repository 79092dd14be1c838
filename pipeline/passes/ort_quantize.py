"""onnx_int8_dynamic and onnx_int8_static: onnxruntime.quantization, nothing hand-written.

`reduce_range: auto` quantizes weights to 7 bits on CPUs without VNNI, where u8s8 multiply-adds
can saturate (ORT's guidance); with VNNI the full 8 bits are used. The resolved value is recorded.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from pipeline.data import Arrays, batches
from pipeline.fingerprint import has_vnni
from pipeline.passes.base import BuildContext, BuildResult, NoConfig, Pass
from pipeline.passes.onnx_export import MODEL_FILE, graph_stats

QuantType = Literal["qint8", "quint8"]


class DynamicConfig(NoConfig):
    weight_type: QuantType = "qint8"
    per_channel: bool = False
    reduce_range: bool | Literal["auto"] = "auto"
    preprocess: bool = True  # ORT's quant_pre_process: symbolic shape inference + graph cleanup first
    op_types: list[str] | None = None  # None: the quantizer's defaults


class StaticConfig(DynamicConfig):
    format: Literal["qdq", "qoperator"] = "qdq"
    activation_type: QuantType = "quint8"
    per_channel: bool = True
    calibration_method: Literal["minmax", "entropy", "percentile", "distribution"] = "minmax"
    calibration_samples: int = Field(default=256, ge=1)
    calibration_batch: int = Field(default=32, ge=1)


def resolve_reduce_range(value: bool | str) -> bool:
    return (not has_vnni()) if value == "auto" else bool(value)


def _prepare(ctx: BuildContext, config: DynamicConfig) -> str:
    """Path of the model to quantize: the export, pre-processed as ORT recommends when asked."""
    if not config.preprocess:
        return str(ctx.exported_onnx)
    from onnxruntime.quantization.shape_inference import quant_pre_process

    prepared = ctx.out_dir / "preprocessed.onnx"
    quant_pre_process(str(ctx.exported_onnx), str(prepared))
    return str(prepared)


def _finish(ctx: BuildContext, config: DynamicConfig, details: dict[str, Any]) -> BuildResult:
    (ctx.out_dir / "preprocessed.onnx").unlink(missing_ok=True)
    stats = graph_stats(ctx.out_dir / MODEL_FILE)
    return BuildResult(
        MODEL_FILE,
        {
            "nodes": stats["nodes"],
            "top_ops": stats["top_ops"],
            "weight_type": config.weight_type,
            "per_channel": config.per_channel,
            "reduce_range": resolve_reduce_range(config.reduce_range),
            "reduce_range_reason": "auto: " + ("CPU has VNNI" if has_vnni() else "CPU lacks VNNI")
            if config.reduce_range == "auto"
            else "set in params.yaml",
            **details,
        },
    )


def _qtype(name: str) -> Any:
    from onnxruntime.quantization import QuantType

    return {"qint8": QuantType.QInt8, "quint8": QuantType.QUInt8}[name]


class DynamicInt8(Pass):
    Config = DynamicConfig

    def run(self, ctx: BuildContext, config: DynamicConfig) -> BuildResult:
        from onnxruntime.quantization import quantize_dynamic

        quantize_dynamic(
            _prepare(ctx, config),
            str(ctx.out_dir / MODEL_FILE),
            op_types_to_quantize=config.op_types,
            per_channel=config.per_channel,
            reduce_range=resolve_reduce_range(config.reduce_range),
            weight_type=_qtype(config.weight_type),
        )
        return _finish(ctx, config, {})


class CalibrationReader:
    """Feeds the calibration split to ORT's calibrator in batches.

    ORT's CalibrationDataReader accepts any class with `get_next` (its __subclasshook__), so this
    module need not import onnxruntime until a model is actually quantized.
    """

    def __init__(self, inputs: Arrays, batch: int) -> None:
        self._batches = list(batches(inputs, batch))
        self._next = iter(self._batches)

    def get_next(self) -> Arrays | None:
        return next(self._next, None)

    def rewind(self) -> None:
        self._next = iter(self._batches)

    def __iter__(self) -> CalibrationReader:
        return self

    def __next__(self) -> Arrays:
        batch = self.get_next()
        if batch is None:
            raise StopIteration
        return batch


class StaticInt8(Pass):
    Config = StaticConfig

    def run(self, ctx: BuildContext, config: StaticConfig) -> BuildResult:
        from onnxruntime.quantization import CalibrationMethod, QuantFormat, quantize_static

        calibration = ctx.calibration().head(config.calibration_samples)
        reader = CalibrationReader(calibration.inputs, config.calibration_batch)
        quantize_static(
            _prepare(ctx, config),
            str(ctx.out_dir / MODEL_FILE),
            calibration_data_reader=reader,
            quant_format=QuantFormat.QDQ if config.format == "qdq" else QuantFormat.QOperator,
            op_types_to_quantize=config.op_types,
            per_channel=config.per_channel,
            reduce_range=resolve_reduce_range(config.reduce_range),
            activation_type=_qtype(config.activation_type),
            weight_type=_qtype(config.weight_type),
            calibrate_method={
                "minmax": CalibrationMethod.MinMax,
                "entropy": CalibrationMethod.Entropy,
                "percentile": CalibrationMethod.Percentile,
                "distribution": CalibrationMethod.Distribution,
            }[config.calibration_method],
        )
        return _finish(
            ctx,
            config,
            {
                "format": config.format,
                "activation_type": config.activation_type,
                "calibration_method": config.calibration_method,
                "calibration_samples": len(calibration),
                "calibration_origin": calibration.origin,
            },
        )
