"""OpenVINO INT8 variants with NNCF, from convert's ov.Model: nncf.quantize (openvino_int8,
calibrated on the calibration split) and nncf.compress_weights with activations quantized at run
time (openvino_int8_dynamic). The arguments they share with the accuracy-controlled search
(pipeline.optimize.passes.openvino.accuracy_control) are built here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from pipeline.core.config import PARAMS_FILE
from pipeline.core.data import padded_batches
from pipeline.core.errors import ConfigError
from pipeline.optimize.passes.base import (
    BuildContext,
    BuildResult,
    NoConfig,
    run_time_quantization,
    session_runner,
)
from pipeline.optimize.passes.openvino.convert import MODEL_FILE, ConvertsSource, OpenVinoConfig, convert, save

if TYPE_CHECKING:
    import openvino as ov

GROUP_SIZE = "dynamic_quantization_group_size"  # the runtime config key (pipeline.runtimes.ov)


class IgnoredScope(NoConfig):
    """Operations NNCF leaves in float (nncf.IgnoredScope): OpenVINO operation names, types, regexes."""

    names: list[str] = Field(default_factory=list)
    types: list[str] = Field(default_factory=list)
    patterns: list[str] = Field(default_factory=list)


class Int8Config(OpenVinoConfig):
    # auto: NNCF's own default, `mixed` (asymmetric activations, for GELU's skewed outputs) for
    # transformer graphs, `performance` (symmetric) otherwise
    preset: Literal["auto", "performance", "mixed"] = "auto"
    subset_size: int = Field(default=300, ge=1)
    fast_bias_correction: bool = True
    ignored_scope: IgnoredScope = Field(default_factory=IgnoredScope)
    # SmoothQuant's alpha on transformer MatMuls (NNCF applies it for ModelType.TRANSFORMER; it moves
    # activation outliers into the weights); -1 turns it off. Ignored for other models.
    smooth_quant_alpha: float = Field(default=0.95, ge=-1, le=1)


class DynamicQuantizationConfig(OpenVinoConfig):
    mode: Literal["int8_asym", "int8_sym"] = "int8_asym"  # nncf.compress_weights: per output channel
    # DYNAMIC_QUANTIZATION_GROUP_SIZE: activations quantized in groups of this many values at run
    # time (smaller: closer to float, slower); 0 turns it off (weights INT8, float matrix products)
    group_size: int = Field(default=64, ge=0)


class NncfWeightsInt8DynamicActivations(ConvertsSource):
    """INT8 weights (nncf.compress_weights: data-free, per output channel) and INT8 matrix products
    whose activations the CPU plugin quantizes per group of `group_size` values at run time: a
    per-token outlier costs one group its precision, not the whole tensor (static INT8's one scale
    per tensor). The group size is stored in the IR (rt_info runtime_options, which the CPU plugin
    reads at compile) and in the runtime config, so `predict` and any OpenVINO user run it the same way.

    Whether the matrix products ran in INT8 is read from what the plugin computed: its execution
    graph names the same FullyConnected kernel and u8 weights either way, so the pass compares the
    outputs with group size 0 (off) on a calibration batch."""

    Config = DynamicQuantizationConfig

    def run(self, ctx: BuildContext, config: DynamicQuantizationConfig) -> BuildResult:
        import nncf

        compressed = nncf.compress_weights(convert(ctx, config.frontend), mode=nncf.CompressWeightsMode(config.mode))
        compressed.set_rt_info(str(config.group_size), ["runtime_options", "DYNAMIC_QUANTIZATION_GROUP_SIZE"])
        result = save(ctx, compressed, compress_to_fp16=False, config=config, mode=config.mode)
        result.runtime_config[GROUP_SIZE] = config.group_size
        int8 = {"u8", "i8"}
        weights = sum(op.get_type_name() == "Constant" and op.get_element_type().get_type_name() in int8
                      for op in compressed.get_ops())  # fmt: skip
        result.details |= {"group_size": config.group_size, "int8_weight_tensors": weights}
        if not config.group_size:
            result.details |= {"activations_quantized_at_run_time": False, "activations_check": "group_size 0: off"}
            return result
        path, precision = ctx.out_dir / MODEL_FILE, config.inference_precision
        run = {
            size: session_runner("openvino", path, {"inference_precision": precision, GROUP_SIZE: size} | ctx.layout)
            for size in (config.group_size, 0)
        }
        result.details |= run_time_quantization(ctx, run[config.group_size], run[0], "group size 0")
        return result


def calibration_dataset(ctx: BuildContext, model: ov.Model) -> Any:
    """The calibration split one sample per item, as NNCF expects (a fixed batch's worth for
    models that fix their batch axis), fed to the inputs `model` has (a specialised one has fewer)."""
    import nncf

    chunks = padded_batches(ctx.calibration().inputs, ctx.fixed_batch or 1)
    return nncf.Dataset([model_feed(ctx.model_inputs(chunk), model) for chunk, _ in chunks])


def model_feed(inputs: dict[str, Any], model: ov.Model) -> dict[str, Any]:
    """`inputs` without those `model` does not take (an input convert specialised to its known value)."""
    names = {name for port in model.inputs for name in port.get_names()}
    return {name: value for name, value in inputs.items() if name in names}


def resolved_preset(ctx: BuildContext, config: Int8Config) -> str:
    if config.preset != "auto":
        return config.preset
    return "mixed" if ctx.transformer else "performance"


def quantize_kwargs(
    ctx: BuildContext, config: Int8Config, model: ov.Model, advanced: str = "advanced_parameters"
) -> dict[str, Any]:
    """nncf.quantize's arguments: preset, subset, the transformer model type for transformer graphs
    (pipeline.prepare.family: NNCF then keeps attention-sensitive operations in float), the ignored scope.
    `advanced` names the advanced-parameters argument (quantize_with_accuracy_control calls it
    advanced_quantization_parameters)."""
    import nncf
    from nncf.quantization.advanced_parameters import AdvancedQuantizationParameters, AdvancedSmoothQuantParameters

    scope = config.ignored_scope
    known = {op.get_friendly_name() for op in model.get_ops()}
    missing = [name for name in scope.names if name not in known]
    if missing:
        raise ConfigError(
            f"{PARAMS_FILE}: ignored_scope.names (variants section or catalog.{ctx.model}.overrides): "
            f"{', '.join(missing)} not operations of the OpenVINO model of {ctx.model}"
        )
    return {
        "preset": nncf.QuantizationPreset(resolved_preset(ctx, config)),
        "subset_size": config.subset_size,
        "fast_bias_correction": config.fast_bias_correction,
        "model_type": nncf.ModelType.TRANSFORMER if ctx.transformer else None,
        advanced: AdvancedQuantizationParameters(
            smooth_quant_alphas=AdvancedSmoothQuantParameters(matmul=config.smooth_quant_alpha)
        )
        if ctx.transformer
        else None,
        "ignored_scope": nncf.IgnoredScope(names=scope.names, types=scope.types, patterns=scope.patterns)
        if scope != IgnoredScope()
        else None,
    }


class NncfInt8(ConvertsSource):
    """nncf.quantize: post-training INT8 (FakeQuantize) calibrated on the calibration split."""

    Config = Int8Config

    def run(self, ctx: BuildContext, config: Int8Config) -> BuildResult:
        import nncf

        model = convert(ctx, config.frontend)
        dataset = calibration_dataset(ctx, model)
        quantized = nncf.quantize(model, dataset, **quantize_kwargs(ctx, config, model))
        return save(ctx, quantized, compress_to_fp16=False, config=config, **int8_details(ctx, config))


def int8_details(ctx: BuildContext, config: Int8Config) -> dict[str, Any]:
    calibration = ctx.calibration()
    return {
        "preset": resolved_preset(ctx, config),
        **({"preset_why": "auto: NNCF's default for this model type"} if config.preset == "auto" else {}),
        "model_type": "transformer" if ctx.transformer else "default",
        **({"smooth_quant_alpha": config.smooth_quant_alpha} if ctx.transformer else {}),
        "subset_size": min(config.subset_size, len(calibration)),
        "fast_bias_correction": config.fast_bias_correction,
        "calibration_origin": calibration.origin,
        **({"ignored_scope": config.ignored_scope.model_dump()} if config.ignored_scope != IgnoredScope() else {}),
    }
