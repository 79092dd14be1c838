"""onnx_int8_static and onnx_int8_static_search: onnxruntime.quantization.quantize_static, INT8 QDQ
calibrated on the calibration split with quantize_recipe's recipe; the search variant keeps the
lowest-SQNR activations' consumers in float until the validation rows keep the search's target
(pipeline.optimize.passes.onnxruntime.sensitivity).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import AliasChoices, Field

from pipeline.core import onnx_files, rescues
from pipeline.core.data import Arrays, padded_batches
from pipeline.core.errors import NotApplicable
from pipeline.optimize.passes.base import BuildContext, BuildResult, Pass, beyond_reach
from pipeline.optimize.passes.onnxruntime.export import MODEL_FILE
from pipeline.optimize.passes.onnxruntime.quantize_recipe import (
    DynamicConfig,
    QuantType,
    finish,
    is_external,
    prepare,
    qtype,
    recipe,
    resolve_reduce_range,
)
from pipeline.optimize.passes.onnxruntime.sensitivity import Layout, restore_until

if TYPE_CHECKING:
    from pipeline.core.records import VariantRecord

Quantize = Callable[[list[str]], Path]  # quantize with these nodes also kept float; the model written


class StaticConfig(DynamicConfig):
    format: Literal["qdq", "qoperator"] = "qdq"
    activation_type: QuantType = "quint8"
    per_channel: bool | Literal["auto"] = True
    calibration_method: Literal["minmax", "entropy", "percentile", "distribution"] = "minmax"
    calibration_samples: int = Field(default=256, ge=1)
    calibration_batch: int = Field(default=32, ge=1)


class SearchConfig(StaticConfig):
    """The static recipe, then: below its target on the validation rows, the lowest-SQNR activations'
    consumers are kept in float, 1, 2, 4, ... up to max_excluded tensors
    (pipeline.optimize.passes.onnxruntime.sensitivity)."""

    format: Literal["qdq"] = "qdq"  # the search excludes nodes around Q/DQ pairs
    # without a task metric: the worst output's decision score to reach (top-1 agreement, decision F1, a
    # grid's 1 - coordinate error; the worst row's cosine of plain values); `target_cosine` is its old name
    target_score: float = Field(
        default=0.995, gt=0, le=1, validation_alias=AliasChoices("target_score", "target_cosine")
    )
    # with a task metric and labelled validation rows: how far below the source's it may stay, its units
    max_metric_drop: float = Field(default=0.005, ge=0)
    max_excluded: int = Field(default=16, ge=1)
    # start only when onnx_int8_static's figure on its scoring rows lies within this of the target (its drop at most
    # max_metric_drop + reach, else its decision score at least target_score - reach); null: search whatever the start
    reach: float | None = Field(default=0.1, gt=0)


class CalibrationReader:
    """Feeds the calibration split to ORT's calibrator in batches.

    ORT's CalibrationDataReader accepts any class with `get_next` (its __subclasshook__), so this
    module need not import onnxruntime until a model is actually quantized.
    """

    def __init__(self, inputs: Arrays, batch: int, to_model: Callable[[Arrays], Arrays] = dict) -> None:
        """`inputs` rows first; `to_model` gives each batch the model's own layout (BuildContext.model_inputs)."""
        self._batches = [to_model(chunk) for chunk, _ in padded_batches(inputs, batch)]  # every batch the same size
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

        used = recipe(ctx, config, static=True)
        calibration = ctx.calibration().head(config.calibration_samples)
        reader = CalibrationReader(
            calibration.inputs, ctx.max_batch(config.calibration_batch, len(calibration)), ctx.model_inputs
        )
        model, preprocess = prepare(ctx, config)

        fixed_kwargs = {  # every try of the sensitivity search differs only in nodes_to_exclude
            "calibration_data_reader": reader,
            "quant_format": QuantFormat.QDQ if config.format == "qdq" else QuantFormat.QOperator,
            "op_types_to_quantize": used.op_types,
            "per_channel": used.per_channel,
            "reduce_range": resolve_reduce_range(config.reduce_range),
            "activation_type": qtype(config.activation_type),
            "weight_type": qtype(config.weight_type),
            "calibrate_method": {
                "minmax": CalibrationMethod.MinMax,
                "entropy": CalibrationMethod.Entropy,
                "percentile": CalibrationMethod.Percentile,
                "distribution": CalibrationMethod.Distribution,
            }[config.calibration_method],
            "extra_options": used.extra_options,
            "use_external_data_format": is_external(ctx),
        }

        rescued: list[dict[str, Any]] = []

        def quantize(excluded: list[str]) -> Path:
            """Write the model with `excluded` also in float. Around a rescue's symptom (pipeline.core.rescues:
            ort_int32_bias_scale raised, ort_qdq_unloadable written) once more with its remedy, which the
            later tries of a search keep."""
            path = ctx.out_dir / MODEL_FILE
            for _ in range(3):  # at most one retry per rescue
                reader.rewind()
                (ctx.out_dir / (MODEL_FILE + ".data")).unlink(missing_ok=True)  # onnx appends to a side file
                try:
                    quantize_static(model, str(path), nodes_to_exclude=used.nodes_to_exclude + excluded,
                                    **fixed_kwargs)  # fmt: skip
                    problem = unloadable(path)
                except Exception as error:
                    problem = error
                    rescue = rescues.find("ort_int32_bias_scale", error, ctx.variant)
                else:
                    if problem is None:
                        return path
                    qdq = fixed_kwargs["quant_format"] == QuantFormat.QDQ
                    rescue = rescues.find("ort_qdq_unloadable", problem, ctx.variant) if qdq else None
                if rescue is None or any(r["rescue"] == rescue.name for r in rescued):
                    raise problem
                rescued.append(rescue.record(problem))
                if rescue.name == "ort_qdq_unloadable":
                    fixed_kwargs["quant_format"] = QuantFormat.QOperator
                else:
                    fixed_kwargs["extra_options"] = {**fixed_kwargs["extra_options"], **rescue.setting}
            raise problem

        sensitivity = self.quantize(ctx, config, quantize, Path(model), used.op_types)
        built = finish(
            ctx,
            config,
            used,
            preprocess,
            {
                "format": "qoperator" if fixed_kwargs["quant_format"] == QuantFormat.QOperator else "qdq",
                "activation_type": config.activation_type,
                "calibration_method": config.calibration_method,
                "calibration_samples": len(calibration),
                "calibration_origin": calibration.origin,
                **({"sensitivity": sensitivity} if sensitivity else {}),
            },
        )
        built.rescues.extend(rescued)
        return built

    def quantize(
        self, ctx: BuildContext, config: StaticConfig, quantize: Quantize, float_model: Path, op_types: list[str] | None
    ) -> dict[str, Any]:
        """One quantization with the recipe; returns what the build details record of the search (none)."""
        quantize([])
        return {}


class StaticInt8Search(StaticInt8):
    """onnx_int8_static's fallback: its recipe with the sensitivity search, built only when the plain
    model misses the model's quality constraints (registry `rescues`, pipeline.optimize.applicability.not_needed)."""

    Config = SearchConfig

    def nothing_to_gain(self, config: SearchConfig, rescued: dict[str, VariantRecord]) -> str | None:
        """The search raises the task metric, or without one every output's decision score, from where the plain
        model stands: a model that already keeps its target on the scoring rows missed another constraint
        (searching would rebuild it), and one beyond the search's reach would not get there (base.beyond_reach)."""
        reasons = [self.start_question(config, name, record) for name, record in rescued.items()]
        return None if not reasons or None in reasons else "; ".join(filter(None, reasons))

    def start_question(self, config: SearchConfig, rescued: str, record: VariantRecord) -> str | None:
        if record.accuracy_drop is not None:
            kept, figure = record.accuracy_drop <= config.max_metric_drop, record.accuracy_drop
            target = f"max_metric_drop {config.max_metric_drop:g} (task metric drop {figure:.5g})"
        else:
            figure = record.worst_output_score
            if figure is None:
                return None
            kept, target = figure >= config.target_score, f"target_score {config.target_score:g} ({figure:.5g})"
        if kept:
            return nothing_to_search(f"{rescued} already keeps", target, "its scoring rows")
        found = beyond_reach(record, config.reach, config.max_metric_drop, config.target_score)
        return found and f"{rescued}: {found}"

    def quantize(
        self, ctx: BuildContext, config: SearchConfig, quantize: Quantize, float_model: Path, op_types: list[str] | None
    ) -> dict[str, Any]:
        goal = ctx.search_goal()
        metric = goal.metric is not None
        target = goal.source_figure - config.max_metric_drop if metric else config.target_score
        found = restore_until(
            quantize,
            float_model,
            goal,
            ctx.max_batch(config.calibration_batch, len(goal.rows)),
            op_types,
            target,
            config.max_excluded,
            fixed=ctx.fixed_batch is not None,
            layout=Layout(ctx.model_inputs, ctx.rows_out),
        )
        first = found["tries"][0]["validation_figure"]
        if first >= target:  # scoring rows said otherwise, the validation rows agree with it
            what = f"max_metric_drop {config.max_metric_drop:g}" if metric else f"target_score {target:g}"
            where = f"the {len(goal.rows)} validation rows"
            raise NotApplicable(nothing_to_search("its recipe already keeps", f"{what} ({first:.5g})", where))
        return {"searched": goal.what, "target": target, "validation_rows": len(goal.rows), **found}


def unloadable(path: Path) -> Exception | None:
    """What ONNX Runtime says when it cannot load the quantizer's output (None: it loads): a quantized
    graph its own runtime refuses is a symptom to rescue, not an artifact."""
    import onnxruntime as ort

    try:
        ort.InferenceSession(str(path), onnx_files.session_options(), providers=["CPUExecutionProvider"])
    except Exception as error:
        return error
    return None


def nothing_to_search(who: str, target: str, where: str) -> str:
    """Why the search is skipped: the model it would start from already keeps its target."""
    return (
        f"nothing to search: {who} {target} on {where}; the constraint it misses is not one the search "
        "measures (raise the target to search anyway)"
    )
