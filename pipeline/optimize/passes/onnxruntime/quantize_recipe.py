"""The recipe and preparation ORT's INT8 passes share (quantize_dynamic, quantize_static): their
knobs resolved against the model, the export made ready for onnxruntime.quantization, the result
recorded. Nothing hand-written: ORT's quantizers do the quantizing.

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from pipeline.core import onnx_files
from pipeline.core.config import PARAMS_FILE
from pipeline.core.errors import ConfigError, first_line
from pipeline.core.onnx_files import graph_stats
from pipeline.machine.fingerprint import has_vnni
from pipeline.optimize.passes.base import BuildContext, BuildResult, NoConfig
from pipeline.optimize.passes.onnxruntime.export import MODEL_FILE

QuantType = Literal["qint8", "quint8"]
CLEAN, PREPROCESSED = "clean.onnx", "preprocessed.onnx"  # scratch files, removed once quantized
QDQ_OPSET, QDQ_IR = 13, 7  # per-channel DequantizeLinear needs opset 13 (IR 7)


class DynamicConfig(NoConfig):
    weight_type: QuantType = "qint8"
    per_channel: bool | Literal["auto"] = "auto"  # auto: per channel for transformers
    reduce_range: bool | Literal["auto"] = "auto"
    preprocess: bool = True  # ORT's quant_pre_process: symbolic shape inference + graph cleanup first
    op_types: list[str] | None = None  # None: the recipe's (transformers), else the quantizer's defaults
    nodes_to_exclude: list[str] = Field(default_factory=list)  # node names of the ONNX export kept float
    extra_options: dict[str, Any] = Field(default_factory=dict)  # passed to quantize_* as documented by ORT


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


def prepare(ctx: BuildContext, config: DynamicConfig, model: Path | None = None) -> tuple[str, str]:
    """The model to quantize (default: the export) and how it was pre-processed (ORT's
    quant_pre_process, when asked).

    ORT's symbolic shape inference cannot type every graph (jax2onnx exports, for one); the
    pre-processing is an optimisation, so it falls back step by step and says which step it took.
    """
    clean, prepared = without_value_info(ctx, model), str((ctx.out_dir / PREPROCESSED).resolve())
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


def without_value_info(ctx: BuildContext, model_path: Path | None = None) -> str:
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


def finish(
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


def qtype(name: str) -> Any:
    from onnxruntime.quantization import QuantType

    return {"qint8": QuantType.QInt8, "quint8": QuantType.QUInt8}[name]
