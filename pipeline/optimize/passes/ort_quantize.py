"""onnx_int8_dynamic and onnx_int8_static: onnxruntime.quantization, nothing hand-written.

`reduce_range: auto` quantizes weights to 7 bits on CPUs without VNNI, where u8s8 multiply-adds
can saturate (ORT's guidance); with VNNI the full 8 bits are used. The resolved value is recorded.

Transformers (pipeline.prepare.family) get the recipes ORT documents for them, wherever a knob is `auto`:
- dynamic: the graph fused by ORT's transformer optimizer, MatMul and Attention weights per channel;
- static QDQ: only the inputs of MatMuls with constant weights (per channel), their outputs left
  float, so Softmax, LayerNormalization, Gelu, the bias and residual Adds and the attention-score
  MatMuls compute in float: the activations with outliers that naive INT8 destroys. (A layer
  norm's output that feeds a MatMul is quantized for every consumer, QDQ's semantics.)
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from pipeline.core import onnx_files
from pipeline.core.config import PARAMS_FILE
from pipeline.core.data import Arrays, padded_batches
from pipeline.core.errors import ConfigError, NotApplicable, first_line
from pipeline.core.onnx_files import graph_stats
from pipeline.machine.fingerprint import has_vnni
from pipeline.optimize.passes.base import BuildContext, BuildResult, NoConfig, Pass, defect_record, known_defect
from pipeline.optimize.passes.onnx_export import MODEL_FILE
from pipeline.optimize.passes.ort_optimize import fuse_transformer
from pipeline.optimize.passes.ort_sensitivity import Layout, restore_until

if TYPE_CHECKING:
    from pipeline.core.records import VariantRecord

QuantType = Literal["qint8", "quint8"]
CLEAN, PREPROCESSED = "clean.onnx", "preprocessed.onnx"  # scratch files, removed once quantized
QDQ_OPSET, QDQ_IR = 13, 7  # per-channel DequantizeLinear needs opset 13 (IR 7)
Quantize = Callable[[list[str]], Path]  # quantize with these nodes also kept float; the model written


class DynamicConfig(NoConfig):
    weight_type: QuantType = "qint8"
    per_channel: bool | Literal["auto"] = "auto"  # auto: per channel for transformers
    reduce_range: bool | Literal["auto"] = "auto"
    preprocess: bool = True  # ORT's quant_pre_process: symbolic shape inference + graph cleanup first
    op_types: list[str] | None = None  # None: the recipe's (transformers), else the quantizer's defaults
    nodes_to_exclude: list[str] = Field(default_factory=list)  # node names of the ONNX export kept float
    extra_options: dict[str, Any] = Field(default_factory=dict)  # passed to quantize_* as documented by ORT


class StaticConfig(DynamicConfig):
    format: Literal["qdq", "qoperator"] = "qdq"
    activation_type: QuantType = "quint8"
    per_channel: bool | Literal["auto"] = True
    calibration_method: Literal["minmax", "entropy", "percentile", "distribution"] = "minmax"
    calibration_samples: int = Field(default=256, ge=1)
    calibration_batch: int = Field(default=32, ge=1)


class SearchConfig(StaticConfig):
    """The static recipe, then: below this worst-row cosine on the validation rows, the lowest-SQNR
    activations' consumers are kept in float, 1, 2, 4, ... up to max_excluded tensors
    (pipeline.optimize.passes.ort_sensitivity)."""

    format: Literal["qdq"] = "qdq"  # the search excludes nodes around Q/DQ pairs
    target_cosine: float = Field(default=0.995, gt=0, le=1)
    max_excluded: int = Field(default=16, ge=1)


NEEDS_WEIGHT = ("Gather", "EmbedLayerNormalization")  # quantized only when they read a float initializer
FOLLOWERS = ("Transpose",)  # quantized only after a quantized producer: nothing of its own


def dynamic_ops() -> list[str]:
    """The op types ORT's dynamic quantizer rewrites by default (its IntegerOps registry)."""
    from onnxruntime.quantization.registry import IntegerOpsRegistry

    return sorted(IntegerOpsRegistry)


def quantizable_nodes(path: Path, op_types: list[str]) -> int:
    """How many nodes of `op_types` the dynamic quantizer could rewrite: 0 means its output would be the
    float model under an INT8 name."""
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    weights = {i.name for i in graph.initializer if i.data_type == onnx.TensorProto.FLOAT}
    wanted = set(op_types) - set(FOLLOWERS)
    return sum(
        (n.op_type in wanted and (n.op_type not in NEEDS_WEIGHT or bool(weights & set(n.input))))
        or ("MatMul" in wanted and _matmul_gemm(n))
        for n in graph.node
    )


def _matmul_gemm(node: Any) -> bool:
    """A Gemm that ORT's dynamic quantizer rewrites as MatMul + Add (ONNXModel.replace_gemm_with_matmul)."""
    from onnx.helper import get_attribute_value

    attributes = {a.name: get_attribute_value(a) for a in node.attribute}
    return (
        node.op_type == "Gemm"
        and attributes.get("alpha", 1.0) == attributes.get("beta", 1.0) == 1.0
        and (not attributes.get("transA", 0))
    )


def resolve_reduce_range(value: bool | str) -> bool:
    return (not has_vnni()) if value == "auto" else bool(value)


@dataclass(frozen=True)
class Recipe:
    """What a quantizer call is given for this model: its knobs resolved against the model family."""

    name: str
    per_channel: bool
    op_types: list[str] | None
    extra_options: dict[str, Any]
    nodes_to_exclude: list[str]

    def details(self) -> dict[str, Any]:
        return {
            "recipe": self.name,
            "per_channel": self.per_channel,
            "op_types": self.op_types,
            **({"nodes_to_exclude": self.nodes_to_exclude} if self.nodes_to_exclude else {}),
        }


def recipe(ctx: BuildContext, config: DynamicConfig, static: bool) -> Recipe:
    """The transformer recipe (ORT's, for transformer graphs) or the default one, `auto` knobs resolved."""
    check_nodes(ctx, config.nodes_to_exclude)
    extra = dict(config.extra_options)
    per_channel = config.per_channel if isinstance(config.per_channel, bool) else (static or ctx.transformer)
    excluded = list(config.nodes_to_exclude)
    if not ctx.transformer:
        return Recipe("default", per_channel, config.op_types, extra, excluded)
    if static:
        # ORT's QDQ quantizer has no MatMulConstBOnly: the attention-score MatMuls are excluded by name.
        excluded += [name for name in activation_matmuls(ctx.exported_onnx) if name not in excluded]
        extra.setdefault("OpTypesToExcludeOutputQuantization", ["MatMul"])  # the Adds after them read float
        return Recipe("transformer: QDQ on weight MatMuls only", per_channel, config.op_types or ["MatMul"], extra,
                      excluded)  # fmt: skip
    extra.setdefault("MatMulConstBOnly", True)
    extra.setdefault("DefaultTensorType", 1)  # onnx.TensorProto.FLOAT: ORT cannot type contrib-op outputs
    ops = config.op_types or ["MatMul", "Attention"]
    return Recipe("transformer: fused graph, dynamic MatMul/Attention", per_channel, ops, extra, excluded)


def activation_matmuls(path: Path) -> list[str]:
    """MatMuls with no weight among their inputs: attention scores (Q.K^T, P.V), kept float."""
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    constants = {i.name for i in graph.initializer}
    constants |= {o for n in graph.node if n.op_type == "Constant" for o in n.output}
    return [n.name for n in graph.node if n.op_type == "MatMul" and not constants & set(n.input)]


def check_nodes(ctx: BuildContext, names: list[str]) -> None:
    """`nodes_to_exclude` must name nodes of the export: a misspelt name would silently quantize."""
    if not names:
        return
    import onnx

    known = {node.name for node in onnx.load(str(ctx.exported_onnx), load_external_data=False).graph.node}
    missing = [name for name in names if name not in known]
    if missing:
        raise ConfigError(
            f"{PARAMS_FILE}: nodes_to_exclude (variants section or catalog.{ctx.model}.overrides): "
            f"{', '.join(missing)} not in the graph of {ctx.exported_onnx}"
        )


def _prepare(ctx: BuildContext, config: DynamicConfig, model: Path | None = None) -> tuple[str, str]:
    """The model to quantize (default: the export) and how it was pre-processed (ORT's
    quant_pre_process, when asked).

    ORT's symbolic shape inference cannot type every graph (jax2onnx exports, for one); the
    pre-processing is an optimisation, so it falls back step by step and says which step it took.
    """
    clean, prepared = _without_value_info(ctx, model), str((ctx.out_dir / PREPROCESSED).resolve())
    if not config.preprocess:
        return clean, "off"
    from onnxruntime.quantization.shape_inference import quant_pre_process

    external = {"save_as_external_data": True, "external_data_location": PREPROCESSED + ".data"}
    external = external if is_external(ctx) else {}
    # When symbolic shape inference gives up, ORT saves its partial model into the working directory
    # (sym_shape_infer_temp.onnx and a uuid-named .data file): let it write them in a scratch folder.
    with tempfile.TemporaryDirectory(prefix="quant-pre-") as scratch, contextlib.chdir(scratch):
        try:
            quant_pre_process(clean, prepared, **external)
            return prepared, "full"
        except Exception as error:
            reason = f"{type(error).__name__}: {first_line(error)}"
        try:
            quant_pre_process(clean, prepared, skip_symbolic_shape=True, **external)
            return prepared, f"without symbolic shape inference (it failed: {reason})"
        except Exception as error:
            return clean, f"skipped (it failed: {type(error).__name__}: {first_line(error)})"


def _without_value_info(ctx: BuildContext, model_path: Path | None = None) -> str:
    """The export without its value_info, at opset 13 or later.

    Exporters (torch's dynamo, for one) annotate weights with shapes that stop holding once the
    quantizer rewrites them, and ONNX shape inference then refuses the graph ("Inferred shape and
    existing shape differ"); the annotations are optional. ORT's quantizer lifts an older file only
    to opset 11, where DequantizeLinear has no `axis`: a per-channel model of an opset-9 ResNet-50
    then fails to load ("Unrecognized attribute: axis"). onnx's version converter lifts it first."""
    import onnx
    from onnx import version_converter

    model = onnx.load(str(model_path or ctx.exported_onnx))
    del model.graph.value_info[:]
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), QDQ_OPSET)
    if opset < QDQ_OPSET:
        model = version_converter.convert_version(model, QDQ_OPSET)
        model.ir_version = max(model.ir_version, QDQ_IR)
    onnx_files.save(model, ctx.out_dir / CLEAN, external=is_external(ctx))
    return str((ctx.out_dir / CLEAN).resolve())


def is_external(ctx: BuildContext) -> bool:
    """Whether the export keeps its weights in a side file: then so do the quantizer's files."""
    return onnx_files.uses_external_data(ctx.exported_onnx)


def _finish(
    ctx: BuildContext, config: DynamicConfig, used: Recipe, preprocess: str, details: dict[str, Any]
) -> BuildResult:
    onnx_files.remove_unreferenced(ctx.out_dir / MODEL_FILE)  # the scratch models (clean, preprocessed, fused) too
    stats = graph_stats(ctx.out_dir / MODEL_FILE)
    return BuildResult(
        MODEL_FILE,
        {
            **used.details(),
            "nodes": stats["nodes"],
            "top_ops": stats["top_ops"],
            "weight_type": config.weight_type,
            "reduce_range": resolve_reduce_range(config.reduce_range),
            "reduce_range_reason": "auto: " + ("CPU has VNNI" if has_vnni() else "CPU lacks VNNI")
            if config.reduce_range == "auto"
            else "set in params.yaml",
            "preprocess": preprocess,
            **({"extra_options": used.extra_options} if used.extra_options else {}),
            **details,
        },
    )


def _qtype(name: str) -> Any:
    from onnxruntime.quantization import QuantType

    return {"qint8": QuantType.QInt8, "quint8": QuantType.QUInt8}[name]


class DynamicInt8(Pass):
    """ORT's dynamic recipe is for transformers and RNNs: its ConvInteger has no fast CPU kernel (the foreign
    ResNet-50's dynamic INT8 read 5.4x FP32's p50 on amd-26-2-2c, the zoo's CNNs 1.7-3.2x), and ORT
    recommends static INT8 for convolutional models. So a CNN gets none unless `op_types` asks for it."""

    Config = DynamicConfig

    def not_for(self, config: DynamicConfig, family: dict[str, Any]) -> str | None:
        if family.get("model_type") != "cnn" or config.op_types is not None:
            return None
        return (
            f"a convolutional model ({family.get('how', 'model_type: cnn')}): ORT's dynamic ConvInteger has no "
            "fast CPU kernel and ORT recommends static INT8 (onnx_int8_static) for CNNs; op_types: [Conv, MatMul] "
            "builds it anyway"
        )

    def run(self, ctx: BuildContext, config: DynamicConfig) -> BuildResult:
        from onnxruntime.quantization import quantize_dynamic

        used = recipe(ctx, config, static=False)
        ops = used.op_types or dynamic_ops()
        if not quantizable_nodes(ctx.exported_onnx, ops):
            wanted = ", ".join(sorted(set(ops) - set(FOLLOWERS)))
            raise NotApplicable(f"nothing to quantize dynamically: no {wanted} (a Gemm counts as MatMul) in the export")
        details: dict[str, Any] = {}
        if ctx.transformer:  # ORT's transformer recipe quantizes the fused graph, as it is (no pre-processing)
            fused, details = fuse_transformer(ctx)
            model, preprocess = _without_value_info(ctx, fused), "off: the fused transformer graph is quantized"
        else:
            model, preprocess = _prepare(ctx, config)
        quantize_dynamic(
            model,
            str(ctx.out_dir / MODEL_FILE),
            op_types_to_quantize=used.op_types,
            nodes_to_exclude=used.nodes_to_exclude,
            per_channel=used.per_channel,
            reduce_range=resolve_reduce_range(config.reduce_range),
            weight_type=_qtype(config.weight_type),
            extra_options=used.extra_options,
            use_external_data_format=is_external(ctx),
        )
        return _finish(ctx, config, used, preprocess, details)


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
        reader = CalibrationReader(calibration.inputs, ctx.max_batch(config.calibration_batch), ctx.model_inputs)
        model, preprocess = _prepare(ctx, config)

        fixed_kwargs = {  # every try of the sensitivity search differs only in nodes_to_exclude
            "calibration_data_reader": reader,
            "quant_format": QuantFormat.QDQ if config.format == "qdq" else QuantFormat.QOperator,
            "op_types_to_quantize": used.op_types,
            "per_channel": used.per_channel,
            "reduce_range": resolve_reduce_range(config.reduce_range),
            "activation_type": _qtype(config.activation_type),
            "weight_type": _qtype(config.weight_type),
            "calibrate_method": {
                "minmax": CalibrationMethod.MinMax,
                "entropy": CalibrationMethod.Entropy,
                "percentile": CalibrationMethod.Percentile,
                "distribution": CalibrationMethod.Distribution,
            }[config.calibration_method],
            "extra_options": used.extra_options,
            "use_external_data_format": is_external(ctx),
        }

        retried: dict[str, Any] = {}

        def quantize(excluded: list[str]) -> Path:
            for attempt in (1, 2):  # a second time only around a known defect (registry.KNOWN_DEFECTS)
                reader.rewind()
                (ctx.out_dir / (MODEL_FILE + ".data")).unlink(missing_ok=True)  # onnx appends to a side file
                try:
                    quantize_static(model, str(ctx.out_dir / MODEL_FILE),
                                    nodes_to_exclude=used.nodes_to_exclude + excluded, **fixed_kwargs)  # fmt: skip
                    break
                except Exception as error:
                    defect = known_defect(error, ctx.variant)
                    if defect is None or attempt == 2:
                        raise
                    retried.update(defect_record(defect, error))
                    fixed_kwargs["extra_options"] = {
                        **fixed_kwargs["extra_options"],
                        defect.option[0]: defect.option[1],
                    }
            return ctx.out_dir / MODEL_FILE

        sensitivity = self.quantize(ctx, config, quantize, Path(model), used.op_types)
        return _finish(
            ctx,
            config,
            used,
            preprocess,
            {
                "format": config.format,
                "activation_type": config.activation_type,
                "calibration_method": config.calibration_method,
                "calibration_samples": len(calibration),
                "calibration_origin": calibration.origin,
                **({"sensitivity": sensitivity} if sensitivity else {}),
                **({"known_defect_retry": retried} if retried else {}),
            },
        )

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

    def nothing_to_gain(self, config: SearchConfig, rescued: str, record: VariantRecord) -> str | None:
        """The search raises the worst row's cosine; a model that already keeps target_cosine on every
        scoring row missed another constraint (neighbour recall, accuracy): searching would rebuild it."""
        worst = record.worst_cosine
        if worst is None or worst < config.target_cosine:
            return None
        return nothing_to_search(f"{rescued} already keeps", config.target_cosine, "its worst scoring row", worst)

    def quantize(
        self, ctx: BuildContext, config: SearchConfig, quantize: Quantize, float_model: Path, op_types: list[str] | None
    ) -> dict[str, Any]:
        validation = ctx.validation()
        found = restore_until(
            quantize,
            float_model,
            validation,
            ctx.max_batch(config.calibration_batch),
            op_types,
            config.target_cosine,
            config.max_excluded,
            fixed=ctx.fixed_batch is not None,
            layout=Layout(ctx.model_inputs, ctx.rows_out),
        )
        first = found["tries"][0]["validation_cosine"]
        if first >= config.target_cosine:  # scoring rows said otherwise, the validation rows agree with it
            where = f"the {len(validation)} validation rows"
            raise NotApplicable(nothing_to_search("its recipe already keeps", config.target_cosine, where, first))
        return {"target_cosine": config.target_cosine, "validation_rows": len(validation), **found}


def nothing_to_search(who: str, target: float, where: str, cosine: float) -> str:
    """Why the search is skipped: the model it would start from already keeps its target."""
    return (
        f"nothing to search: {who} target_cosine {target:g} on {where} ({cosine:.5g}); the constraint it "
        "misses is not one the search measures (raise target_cosine to search anyway)"
    )
