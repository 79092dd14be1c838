"""openvino_int8_acc: nncf.quantize_with_accuracy_control, INT8 with operations reverted to float
until the validation rows' metric drops by at most max_drop, and the search's budget.

NNCF's search has no time bound and no report of what it reverted: Validation (its validation
function, accuracy_search.py) keeps the budget and stops a search that cannot finish in it
(SearchStopped), and two patches of NNCF internals, each undone on exit, tell it when NNCF ranks
groups of quantized operations and keep the restorer's report.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pipeline.core import rescues
from pipeline.core.errors import PipelineError
from pipeline.optimize.passes.base import BuildContext, BuildResult, beyond_reach
from pipeline.optimize.passes.openvino.accuracy_search import Int8AccuracyConfig, SearchStopped, Validation
from pipeline.optimize.passes.openvino.convert import ConvertsSource, convert, save
from pipeline.optimize.passes.openvino.quantize import calibration_dataset, int8_details, quantize_kwargs

if TYPE_CHECKING:
    from pipeline.core.records import VariantRecord

STARTS_FROM = "openvino_int8"  # the variant whose recipe the search quantizes with first: where it starts


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


@dataclass
class RestorerReport:
    """NNCF's accuracy restorer report, once it prints one (None: the first quantization met max_drop)."""

    report: Any = None


@contextmanager
def _capturing_restorer_report() -> Iterator[RestorerReport]:
    """NNCF logs, but does not return, which operations it reverted to float; keep its report."""
    from nncf.quantization.algorithms.accuracy_control.algorithm import QuantizationAccuracyRestorer

    captured = RestorerReport()
    original = QuantizationAccuracyRestorer._print_report

    def keep(report: Any, max_num_iterations: int) -> None:
        captured.report = report
        original(report, max_num_iterations)

    QuantizationAccuracyRestorer._print_report = staticmethod(keep)
    try:
        yield captured
    finally:
        QuantizationAccuracyRestorer._print_report = staticmethod(original)


class NncfInt8AccuracyControl(ConvertsSource):
    """nncf.quantize_with_accuracy_control: INT8, reverting operations to float until the
    eval-split metric drops by at most `max_drop`."""

    Config = Int8AccuracyConfig

    def nothing_to_gain(self, config: Int8AccuracyConfig, rescued: dict[str, VariantRecord]) -> str | None:
        """The search quantizes as openvino_int8 does, then reverts: it starts where that variant's record stands,
        and a start beyond its reach is skipped in no time (base.beyond_reach); openvino_int8_dynamic's record says
        nothing of it."""
        if (start := rescued.get(STARTS_FROM)) is None:
            return None
        relative = config.drop_type == "relative"
        found = beyond_reach(start, config.reach, config.max_drop, 1.0 - config.max_drop, relative)
        return found and f"{STARTS_FROM}: {found}"

    def run(self, ctx: BuildContext, config: Int8AccuracyConfig) -> BuildResult:
        import nncf
        import openvino as ov
        from nncf.parameters import DropType
        from nncf.quantization.advanced_parameters import AdvancedAccuracyRestorerParameters

        absolute = config.max_drop if config.drop_type == "absolute" else None
        model = convert(ctx, config.frontend)
        validation = Validation(ctx, config.max_seconds, absolute, config.seconds_per_group, model, config.steps)
        kwargs = quantize_kwargs(ctx, config, model, advanced="advanced_quantization_parameters")
        try:
            with _capturing_restorer_report() as captured, _watching_ranking(validation):
                quantized = nncf.quantize_with_accuracy_control(
                    model,
                    calibration_dataset(ctx, model),
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
                f"{time.monotonic() - validation.started:.0f} s, {validation.metric} on the validation rows at "
                f"{reached:.4g} against FP32's {fp32_value:.4g} (max_drop {config.max_drop:g}); raise "
                f"variants.openvino_int8_acc.steps, max_seconds, seconds_per_group or max_drop"
            ) from None
        except PipelineError:
            raise
        except Exception as error:  # NNCF's own failure: rescue nncf_accuracy_control_crash, else the failure
            rescue = rescues.find("nncf_accuracy_control_crash", error, ctx.variant)
            if rescue is None:
                raise
            return self.ranked(ctx, config, model, validation, rescue.record(error))
        search_s = time.monotonic() - validation.started
        report = captured.report
        budget = {"budget_s": validation.max_seconds, "budget_how": validation.budget_how}
        validation.max_seconds = None  # the figures below are measured, whatever the budget
        core = ov.Core()
        fp32_value, _ = validation(
            core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"}), validation.items
        )
        int8_value, _ = validation(core.compile_model(quantized, "CPU"), validation.items)
        drop = fp32_value - int8_value if config.drop_type == "absolute" else (fp32_value - int8_value) / fp32_value
        details = {
            **int8_details(ctx, config),
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
            **budget,
            "stopped_by": "nncf",  # it met max_drop: a stopped search fails the build (SearchStopped)
        }
        return save(ctx, quantized, compress_to_fp16=False, config=config, **details)

    def ranked(
        self, ctx: BuildContext, config: Int8AccuracyConfig, model: Any, validation: Validation, rescue: dict[str, Any]
    ) -> BuildResult:
        """NNCF's search failed: ONNX Runtime's ranking picks what stays in float (openvino.ranked_fallback)."""
        from pipeline.optimize.passes.openvino.ranked_fallback import ranked_search

        validation.max_seconds = None  # the budget was NNCF's search's
        started = time.monotonic()
        quantized, found = ranked_search(ctx, config, model, validation)
        details = {**int8_details(ctx, config), "max_drop": config.max_drop, "drop_type": config.drop_type,
                   "validation_metric": validation.metric, "validation_samples": validation.samples,
                   "validation_origin": validation.origin, **found, "search_s": time.monotonic() - started,
                   "stopped_by": "ranked_fallback"}  # fmt: skip
        return save(ctx, quantized, compress_to_fp16=False, config=config, rescued=(rescue,), **details)
