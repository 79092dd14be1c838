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

import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import Field

from pipeline.core.config import PARAMS_FILE
from pipeline.core.data import Arrays, DataSet, padded_batches
from pipeline.core.errors import ConfigError, PipelineError
from pipeline.core.evaluate import cosine_per_sample, mixed_scale_channels, predictions, search_score
from pipeline.optimize.passes.base import (
    BuildContext,
    BuildResult,
    NoConfig,
    Pass,
    run_time_quantization,
    session_runner,
)

if TYPE_CHECKING:
    import openvino as ov

MODEL_FILE = "model.xml"
GROUP_SIZE = "dynamic_quantization_group_size"  # the runtime config key (pipeline.runtimes.ov)
Precision = Literal["f32", "bf16", "f16", "auto"]


class OpenVinoConfig(NoConfig):
    frontend: Literal["onnx", "source"] = "onnx"
    inference_precision: Precision = "auto"


class Fp32Config(OpenVinoConfig):
    inference_precision: Precision = "f32"


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


class Int8AccuracyConfig(Int8Config):
    max_drop: float = Field(default=0.01, gt=0)
    drop_type: Literal["absolute", "relative"] = "absolute"
    max_num_iterations: int = Field(default=500, ge=1)
    max_seconds: float | None = Field(default=120, gt=0)  # the search's budget; null: no bound but the build timeout
    # each group of quantized operations NNCF ranks adds this to max_seconds: a model with many layers gets
    # a budget that fits it (a paddle2onnx detector's 71 groups stopped at 120 s, 34 s short of ranking them)
    seconds_per_group: float = Field(default=2.0, ge=0)


class DynamicQuantizationConfig(OpenVinoConfig):
    mode: Literal["int8_asym", "int8_sym"] = "int8_asym"  # nncf.compress_weights: per output channel
    # DYNAMIC_QUANTIZATION_GROUP_SIZE: activations quantized in groups of this many values at run
    # time (smaller: closer to float, slower); 0 turns it off (weights INT8, float matrix products)
    group_size: int = Field(default=64, ge=0)


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


class NncfWeightsInt8DynamicActivations(Pass):
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


def calibration_dataset(ctx: BuildContext) -> Any:
    """The calibration split one sample per item, as NNCF expects (a fixed batch's worth for
    models that fix their batch axis)."""
    import nncf

    chunks = padded_batches(ctx.calibration().inputs, ctx.fixed_batch or 1)
    return nncf.Dataset([ctx.model_inputs(chunk) for chunk, _ in chunks])


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


class NncfInt8(Pass):
    """nncf.quantize: post-training INT8 (FakeQuantize) calibrated on the calibration split."""

    Config = Int8Config

    def run(self, ctx: BuildContext, config: Int8Config) -> BuildResult:
        import nncf

        dataset = calibration_dataset(ctx)
        model = convert(ctx, config.frontend)
        quantized = nncf.quantize(model, dataset, **quantize_kwargs(ctx, config, model))
        return save(ctx, quantized, compress_to_fp16=False, config=config, **_int8_details(ctx, config))


def _int8_details(ctx: BuildContext, config: Int8Config) -> dict[str, Any]:
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


class SearchStopped(Exception):
    """Accuracy control out of its budget, or projected to miss max_drop within it."""


class Validation:
    """NNCF's validation function over the validation rows (never the scoring rows), one value per item.

    The task metric (mean over the rows) when the model has one and the rows have labels; otherwise
    fidelity: each row's cosine similarity to the FP32 source, the worst over every output, and the
    metric is the *worst row*, the figure the selection's `min_cosine` checks on the scoring rows:
    `max_drop: 0.005` asks for a worst-row cosine of 0.995. (A mean let a pretrained MiniLM's INT8
    through at a mean drop of 0.005 with its worst row at 0.989.)

    `max_seconds` bounds the search, and it stops sooner once it cannot finish in time: while NNCF
    ranks the groups of quantized operations (one validation per group, before any is reverted), when
    the groups left at the pace so far need more than the seconds left; once it reverts, after two
    reverted models were validated on every row, when the gain per second since the first of them,
    projected over the seconds left, cannot reach the FP32 value minus max_drop (absolute). Either
    way the next call raises SearchStopped (`stop_reason` says which bound): NNCF returns a model only
    once it meets max_drop, so the one it holds by then does not, and its ranking would go on
    compiling models whatever the validation answered. Never before the first quantized model was
    validated: when that one meets max_drop there is no search to stop.
    """

    def __init__(
        self,
        ctx: BuildContext,
        max_seconds: float | None = None,
        max_drop: float | None = None,
        seconds_per_group: float = 0.0,
    ) -> None:
        rows: DataSet = ctx.validation()
        self.class_scores = ctx.config.metric if ctx.config.metric != "none" and rows.labels is not None else None
        grid = any(mixed_scale_channels(v) is not None for v in rows.outputs.values())
        self.metric = self.class_scores or ("worst-row score (1 - a grid's worst channel error)" if grid
                                            else "worst-row cosine")  # fmt: skip
        size = ctx.fixed_batch or 1
        chunks = padded_batches(rows.inputs, size)
        starts = range(0, len(rows), size)
        self.items = [
            (ctx.model_inputs(chunk), self._targets(rows, start, real))
            for start, (chunk, real) in zip(starts, chunks, strict=True)
        ]
        self.output_names, self.rows_out = list(rows.outputs), ctx.rows_out
        self.seconds_per_group, self.granted = seconds_per_group, False
        self.samples = len(rows)
        self.origin = rows.origin
        self.max_seconds = max_seconds
        self.started = time.monotonic()
        self.max_drop = max_drop  # absolute: the value to reach is the FP32 model's minus this
        self.whole: list[tuple[float, float]] = []  # (seconds, value) of each model validated on every row
        self.stop_reason: str | None = None
        self.ranking: list[float] | None = None  # while NNCF ranks groups: [groups, scored, started]

    def _targets(self, rows: DataSet, start: int, real: int) -> Any:
        if self.class_scores:
            return rows.labels[start : start + real].reshape(real, -1)[:, 0].astype(np.int64)
        return [v[start : start + real] for v in rows.outputs.values()]

    def score(self, outputs: list[np.ndarray], target: Any) -> float:
        """One item's value: task metric (mean over its rows), or the worst output's mean cosine
        (an item is one row unless the model fixes a larger batch)."""
        real = len(target) if self.class_scores else len(target[0])
        if self.class_scores:
            return float(np.mean(predictions(outputs[0][:real], self.class_scores) == target))
        return min(
            search_score(ref, out[:real])
            if mixed_scale_channels(ref)
            else float(cosine_per_sample(ref, out[:real]).mean())
            for ref, out in zip(target, outputs, strict=True)
        )  # a mixed-scale grid: 1 - its worst channel's error (its cosine follows the largest channels)

    def __call__(self, compiled: Any, items: Any) -> tuple[float, list[float]]:
        if len(self.whole) >= 2 and self._should_stop():
            raise SearchStopped(self.stop_reason)
        values = [self.score(self.run(compiled, inputs), target) for inputs, target in items]
        result = float(np.mean(values) if self.class_scores else np.min(values)), values
        if self.ranking is not None:
            self.ranking[1] += 1  # one group's score (a model with that group reverted, on the ranking subset)
        elif len(values) == len(self.items):
            self.whole.append((time.monotonic() - self.started, result[0]))
        return result

    def rows_first(self, outputs: list[np.ndarray]) -> list[np.ndarray]:
        """The compiled model's outputs (in its own layout) rows first, as the targets are."""
        return list(self.rows_out(dict(zip(self.output_names, outputs, strict=True))).values())

    def ranking_started(self, groups: int) -> None:
        """NNCF starts ranking `groups` groups: the budget grows by seconds_per_group for each."""
        if self.max_seconds and self.ranking is None and not self.granted:
            self.max_seconds += self.seconds_per_group * groups
            self.granted = True  # once: a second ranking gets no more
        self.ranking = [groups, 0, time.monotonic()]

    @property
    def fp32_value(self) -> float | None:
        """The source's value: NNCF validates it on every row first (after a one-item probe)."""
        return self.whole[0][1] if self.whole else None

    def _should_stop(self) -> bool:
        """Out of seconds, or the search's pace cannot reach the target in the seconds left."""
        elapsed = time.monotonic() - self.started
        if not self.max_seconds:
            return False
        if elapsed > self.max_seconds:
            self.stop_reason = f"max_seconds: {self.max_seconds:g} s spent"
            return True
        left = self.max_seconds - elapsed
        if self.ranking is not None:  # NNCF scores every group before it reverts any
            groups, scored, since = self.ranking
            needs = (time.monotonic() - since) / scored * (groups - scored) if scored >= 2 else 0.0
            if needs > left:
                self.stop_reason = (
                    f"projected: ranking {groups:.0f} groups of quantized operations needs about {needs:.0f} s "
                    f"more ({scored:.0f} scored), past the {left:.0f} s left of max_seconds"
                )
                return True
            return False
        # whole[0]: FP32, whole[1]: the quantized model, then one per model with reverted operations
        if self.max_drop is None or len(self.whole) < 4:
            return False
        target = self.whole[0][1] - self.max_drop
        (t0, v0), (t1, v1) = self.whole[2], self.whole[-1]
        if v1 >= target:
            return False
        pace = (v1 - v0) / (t1 - t0) if t1 > t0 else 0.0
        if pace <= 0 or (target - v1) / pace > left:
            self.stop_reason = (
                f"projected: {self.metric} {v1:.4g} after {len(self.whole) - 2} reverts, gaining "
                f"{pace:.3g}/s; reaching {target:.4g} needs more than the {left:.0f} s left of max_seconds"
            )
            return True
        return False

    def run(self, compiled: Any, inputs: Arrays) -> list[np.ndarray]:
        """The compiled model's outputs for one item, rows first as the targets are."""
        result = compiled(dict(enumerate(inputs.values())))
        return self.rows_first([np.asarray(result[port]) for port in compiled.outputs])


@contextmanager
def _watching_ranking(validation: Validation) -> Any:
    """NNCF ranks every group of quantized operations (a model with that group reverted, validated on
    the ranking subset) before it reverts any: tell the validation when, so those calls are counted
    as ranking, not as progress, and the ranking's own time is projected against the budget."""
    from nncf.quantization.algorithms.accuracy_control.ranker import Ranker

    original = Ranker.rank_groups_of_quantizers

    def watched(self: Any, groups_to_rank: list[Any], *args: Any, **kwargs: Any) -> Any:
        validation.ranking_started(len(groups_to_rank))
        try:
            return original(self, groups_to_rank, *args, **kwargs)
        finally:
            validation.ranking = None

    Ranker.rank_groups_of_quantizers = watched
    try:
        yield
    finally:
        Ranker.rank_groups_of_quantizers = original


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

        absolute = config.max_drop if config.drop_type == "absolute" else None
        validation = Validation(ctx, config.max_seconds, absolute, config.seconds_per_group)
        model = convert(ctx, config.frontend)
        kwargs = quantize_kwargs(ctx, config, model, advanced="advanced_quantization_parameters")
        try:
            with _capturing_restorer_report() as captured, _watching_ranking(validation):
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
                    **kwargs,
                )
        except SearchStopped:
            fp32_value, reached = validation.fp32_value, validation.whole[-1][1]
            raise PipelineError(
                f"accuracy control stopped ({validation.stop_reason}) after "
                f"{time.monotonic() - validation.started:.0f} s, the {validation.metric} on the validation rows at "
                f"{reached:.4g} against FP32's {fp32_value:.4g} (max_drop {config.max_drop:g}); raise "
                f"variants.openvino_int8_acc.max_seconds, seconds_per_group or max_drop"
            ) from None
        search_s = time.monotonic() - validation.started
        report = captured.get("report")
        validation.max_seconds = None  # the figures below are measured, whatever the budget
        core = ov.Core()
        fp32_value, _ = validation(
            core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"}), validation.items
        )
        int8_value, _ = validation(core.compile_model(quantized, "CPU"), validation.items)
        drop = fp32_value - int8_value if config.drop_type == "absolute" else (fp32_value - int8_value) / fp32_value
        details = {
            **_int8_details(ctx, config),
            "max_drop": config.max_drop,
            "drop_type": config.drop_type,
            "validation_metric": validation.metric,
            "validation_samples": validation.samples,
            "validation_origin": validation.origin,
            "validation_fp32": fp32_value,
            "validation_int8": int8_value,
            "validation_drop": drop,
            # No report means the first quantization already met max_drop: nothing was reverted.
            "reverted_operations": len(report.reverted_operations) if report else 0,
            "quantized_operations": report.num_quantized_operations if report else None,
            "reached_max_drop": bool(drop <= config.max_drop),
            "search_s": search_s,
            "max_seconds": config.max_seconds,
            "stopped_by": "nncf",  # it met max_drop: a stopped search fails the build (SearchStopped)
        }
        return save(ctx, quantized, compress_to_fp16=False, config=config, **details)
