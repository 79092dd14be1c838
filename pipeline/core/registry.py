"""The variant catalogue: each name maps to one pass (source -> artifact) and one runtime.

This table is the one place a backend is registered. Passes and runtimes are named by import
path and imported only when used, so listing or validating variants costs no framework import.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from pipeline.core.errors import ConfigError
from pipeline.core.layout import PARAMS_FILE
from pipeline.core.records import Kind
from pipeline.core.validation import validate

if TYPE_CHECKING:
    from pipeline.core.config import ModelConfig


@dataclass(frozen=True)
class Variant:
    name: str
    summary: str
    runtime: str
    precision: str
    pass_ref: str  # "module:Class" of a pipeline.build.passes.base.Pass
    sources: frozenset[str] | None = None  # source kinds it applies to; None: any, through the ONNX export
    device: str = "cpu"  # the kind of target it runs on (pipeline.core.targets)
    per_target: bool = False  # its artifact depends on the hardware that builds it: params.yaml machine_variants
    runtime_options: tuple[tuple[str, Any], ...] = ()  # fixed runtime_config entries (an ORT provider, say)
    should_beat: str | None = None  # the higher-precision variant of its runtime and target it must be faster than
    generates: bool = False  # a text-generation variant (a decoder with its KV cache), for task: text-generation

    @property
    def needs_export(self) -> bool:
        return self.sources is None

    def pass_class(self) -> Any:
        module, _, cls = self.pass_ref.partition(":")
        return getattr(importlib.import_module(module), cls)


# fmt: off
VARIANTS: dict[str, Variant] = {v.name: v for v in [
    Variant("onnx_fp32", "the ONNX export as is", "onnxruntime", "fp32",
            "pipeline.build.passes.onnx_export:AsExported"),
    Variant("onnx_opt", "ONNX Runtime offline graph optimization (+ onnxslim where it removes nodes)",
            "onnxruntime", "fp32", "pipeline.build.passes.ort_optimize:OrtOptimize"),
    Variant("onnx_fp16", "float16 weights and compute, FP32 inputs/outputs kept (onnxconverter-common)",
            "onnxruntime", "fp16", "pipeline.build.passes.fp16:Float16", should_beat="onnx_fp32"),
    Variant("onnx_int8_dynamic", "INT8 weights, activations quantized at run time (quantize_dynamic)",
            "onnxruntime", "int8", "pipeline.build.passes.ort_quantize:DynamicInt8", per_target=True,
            should_beat="onnx_fp32"),  # reduce_range: auto reads the building CPU's ISA
    Variant("onnx_int8_static", "INT8 QDQ calibrated on the calibration split (quantize_static)",
            "onnxruntime", "int8", "pipeline.build.passes.ort_quantize:StaticInt8", per_target=True,
            should_beat="onnx_fp32"),
    Variant("openvino_fp32", "OpenVINO IR, FP32 weights, f32 inference pinned", "openvino", "fp32",
            "pipeline.build.passes.openvino:OpenVinoFp32"),
    Variant("openvino_fp16", "OpenVINO IR, FP16-compressed weights", "openvino", "fp16",
            "pipeline.build.passes.openvino:OpenVinoFp16", should_beat="openvino_fp32"),
    Variant("openvino_int8", "OpenVINO IR quantized by nncf.quantize on the calibration split",
            "openvino", "int8", "pipeline.build.passes.openvino:NncfInt8", should_beat="openvino_fp32"),
    Variant("openvino_int8_acc", "nncf.quantize_with_accuracy_control: INT8 within max_drop on the eval split",
            "openvino", "int8", "pipeline.build.passes.openvino:NncfInt8AccuracyControl", should_beat="openvino_fp32"),
    Variant("torch_eager", "the PyTorch source model itself: the baseline", "torch", "fp32",
            "pipeline.build.passes.pytorch:TorchEager", frozenset({"torch"})),
    Variant("torch_compile", "AOTInductor package of the PyTorch source (torch.export + TorchInductor)",
            "torch", "fp32", "pipeline.build.passes.pytorch:TorchCompile", frozenset({"torch"}), per_target=True),
    Variant("torch_xla", "PyTorch source converted to JAX by torchax, exported like jax_xla", "jax", "fp32",
            "pipeline.build.passes.jax_xla:TorchXla", frozenset({"torch"})),
    Variant("tf_graph", "the TF/Keras source as a SavedModel serving a plain tf.function", "tensorflow", "fp32",
            "pipeline.build.passes.tf_saved:TfGraph", frozenset({"keras", "savedmodel"})),
    Variant("tf_xla", "the same with tf.function(jit_compile=True): XLA-compiled at load", "tensorflow", "fp32",
            "pipeline.build.passes.tf_saved:TfXla", frozenset({"keras", "savedmodel"})),
    Variant("jax_jit", "the JAX source's apply function under jax.jit", "jax", "fp32",
            "pipeline.build.passes.jax_xla:JaxJit", frozenset({"jax"})),
    Variant("jax_xla", "jax.export of the jitted function (StableHLO), compiled at load", "jax", "fp32",
            "pipeline.build.passes.jax_xla:JaxXla", frozenset({"jax"})),
    # Text generation (task: text-generation): a causal LM with its KV cache, greedy decoding.
    Variant("lm_torch", "the Hugging Face model in PyTorch, decoding with its KV cache: the baseline",
            "transformers", "fp32", "pipeline.build.passes.decoder:LmTorch", frozenset({"transformers"}),
            generates=True),
    Variant("lm_onnx_fp32", "ONNX with past key/values by onnxruntime-genai's model builder, run by "
            "onnxruntime-genai", "onnxruntime-genai", "fp32", "pipeline.build.passes.decoder:GenaiFp32",
            frozenset({"transformers"}), generates=True),
    Variant("lm_onnx_int8", "the builder's ONNX with weight-only INT8 MatMulNBits (block-wise, RTN)",
            "onnxruntime-genai", "int8", "pipeline.build.passes.decoder:GenaiInt8", frozenset({"transformers"}),
            generates=True, should_beat="lm_onnx_fp32"),
    Variant("lm_onnx_int4", "the builder's ONNX with weight-only INT4 MatMulNBits (block-wise, RTN)",
            "onnxruntime-genai", "int4", "pipeline.build.passes.decoder:GenaiInt4", frozenset({"transformers"}),
            generates=True, should_beat="lm_onnx_fp32"),
    Variant("lm_openvino_fp32", "stateful OpenVINO IR (KV cache as model state), f32 inference and KV cache "
            "pinned, run by openvino-genai", "openvino-genai", "fp32", "pipeline.build.passes.decoder:OvFp32",
            frozenset({"transformers"}), generates=True),
    Variant("lm_openvino_fp16", "the stateful IR with FP16 weights; the CPU plugin's own inference and KV-cache "
            "precision (bf16 and u8 where the CPU has them)", "openvino-genai", "fp16",
            "pipeline.build.passes.decoder:OvFp16", frozenset({"transformers"}), generates=True,
            should_beat="lm_openvino_fp32"),
    Variant("lm_openvino_int8", "the stateful IR with weights compressed to INT8 by nncf.compress_weights",
            "openvino-genai", "int8", "pipeline.build.passes.decoder:OvInt8", frozenset({"transformers"}),
            generates=True, should_beat="lm_openvino_fp32"),
    Variant("lm_openvino_int4", "the stateful IR with weights compressed to INT4 (group-wise) by "
            "nncf.compress_weights", "openvino-genai", "int4", "pipeline.build.passes.decoder:OvInt4",
            frozenset({"transformers"}), generates=True, should_beat="lm_openvino_fp32"),
    # GPU targets (NVIDIA, CUDA): skipped with the target probe's reason where there is none.
    Variant("onnx_cuda_fp32", "the ONNX export on ONNX Runtime's CUDA execution provider", "onnxruntime",
            "fp32", "pipeline.build.passes.onnx_export:AsExported", device="cuda", per_target=True,
            runtime_options=(("provider", "cuda"),)),
    Variant("onnx_cuda_fp16", "onnx_fp16's FP16 graph on ONNX Runtime's CUDA execution provider", "onnxruntime",
            "fp16", "pipeline.build.passes.fp16:Float16", device="cuda", per_target=True,
            runtime_options=(("provider", "cuda"),), should_beat="onnx_cuda_fp32"),
    Variant("onnx_trt_fp16", "ONNX Runtime's TensorRT execution provider, FP16 enabled, engine cached in "
            "the artifact", "onnxruntime", "fp16", "pipeline.build.passes.tensorrt:OrtTensorRt", device="cuda",
            per_target=True, runtime_options=(("provider", "tensorrt"), ("fp16", True))),
    Variant("onnx_trt_int8", "the QDQ INT8 model (onnx_int8_static's recipe) on the TensorRT execution "
            "provider: explicit quantization, no calibration table", "onnxruntime", "int8",
            "pipeline.build.passes.tensorrt:OrtTensorRtQdq", device="cuda", per_target=True,
            runtime_options=(("provider", "tensorrt"), ("fp16", True), ("int8", True)),
            should_beat="onnx_trt_fp16"),
    Variant("tensorrt_fp16", "onnx_fp16's graph built into a TensorRT engine (tensorrt API, strongly typed)",
            "tensorrt", "fp16", "pipeline.build.passes.tensorrt:EngineFp16", device="cuda", per_target=True),
    Variant("tensorrt_int8", "a TensorRT engine of the QDQ INT8 model (explicit quantization)",
            "tensorrt", "int8", "pipeline.build.passes.tensorrt:EngineInt8", device="cuda", per_target=True,
            should_beat="tensorrt_fp16"),
    Variant("torch_compile_cuda", "AOTInductor package of the PyTorch source compiled for CUDA", "torch",
            "fp32", "pipeline.build.passes.pytorch:TorchCompile", frozenset({"torch"}), device="cuda", per_target=True),
]}
# fmt: on


@dataclass(frozen=True)
class Runtime:
    module: str
    packages: tuple[str, ...]  # import names that must be installed
    distribution: str  # the installed package whose version a deployment records
    devices: tuple[str, ...] = ("cpu",)  # target kinds its adapter can run on


RUNTIMES: dict[str, Runtime] = {
    "onnxruntime": Runtime("pipeline.runtimes.ort", ("onnxruntime",), "onnxruntime", ("cpu", "cuda")),
    "torch": Runtime("pipeline.runtimes.torch_rt", ("torch",), "torch", ("cpu", "cuda")),
    "tensorrt": Runtime("pipeline.runtimes.trt", ("tensorrt", "cuda.bindings"), "tensorrt", ("cuda",)),
    "openvino": Runtime("pipeline.runtimes.ov", ("openvino",), "openvino"),
    "tensorflow": Runtime("pipeline.runtimes.tf_rt", ("tensorflow",), "tensorflow-cpu"),
    "jax": Runtime("pipeline.runtimes.jax_rt", ("jax", "flax"), "jax"),
    # generators (pipeline.runtimes.generator): text-generation variants
    "transformers": Runtime("pipeline.runtimes.lm_torch", ("torch", "transformers"), "transformers"),
    "onnxruntime-genai": Runtime("pipeline.runtimes.lm_ort", ("onnxruntime_genai",), "onnxruntime-genai"),
    "openvino-genai": Runtime("pipeline.runtimes.lm_ov", ("openvino_genai",), "openvino-genai"),
}


def unavailable_reason(name: str, target: str = "cpu") -> str | None:
    """Why runtime `name` cannot run on `target` on this machine, or None when it can.

    On a GPU the adapter's own `unavailable_on(target)` asks the framework (a CPU-only build of
    torch, onnxruntime without its CUDA provider)."""
    runtime = RUNTIMES[name]
    missing = [p for p in runtime.packages if _missing(p)]
    if missing:
        return f"{', '.join(missing)} is not installed" + (" (pip install -e '.[gpu]')" if target != "cpu" else "")
    kind = target.partition(":")[0]
    if kind not in runtime.devices:
        return f"the {name} adapter runs on {', '.join(runtime.devices)}, not {kind}"
    return None if kind == "cpu" else importlib.import_module(runtime.module).unavailable_on(target)


def _missing(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is None
    except ModuleNotFoundError:  # a dotted name whose parent package is absent
        return True


# The native way to run each source kind: every speed-up is taken against it.
BASELINES = {
    "torch": "torch_eager",
    "keras": "tf_graph",
    "savedmodel": "tf_graph",
    "jax": "jax_jit",
    "onnx": "onnx_fp32",
    "transformers": "lm_torch",
}


def ordered(names: object) -> list[str]:
    """`names` (any container of variant names) in catalogue order: how tables list variants."""
    return [name for name in VARIANTS if name in names]


def should_beat(precision: str) -> dict[str, str]:
    """{variant: the variant it must be faster than} for the variants of one precision (fp16, int8)."""
    return {v.name: v.should_beat for v in VARIANTS.values() if v.should_beat and v.precision == precision}


def get(name: str, source: str = PARAMS_FILE) -> Variant:
    if name not in VARIANTS:
        raise ConfigError(f"{source}: variants.{name}: unknown variant (known: {', '.join(VARIANTS)})")
    return VARIANTS[name]


def validate_variant_params(
    name: str, data: dict[str, Any], source: str = PARAMS_FILE, section: str = "variants"
) -> BaseModel:
    """Check a variant's knobs (its `variants.<name>` section, or a model's overrides of it)."""
    config_class = get(name, source).pass_class().Config
    return validate(config_class, data, source, prefix=f"{section}.{name}")


@dataclass(frozen=True)
class Skip:
    """Why a variant is not built for a model here, and which kind of skip that is."""

    kind: Kind
    reason: str


def skip_reason(
    variant: Variant, model: str, config: ModelConfig, target: str | None, probe: dict[str, Any]
) -> Skip | None:
    """Why `variant` does not apply to `model` on `target` (probed as `probe`), or None when it does."""
    if variant.name in config.skip:
        return Skip(Kind.NOT_APPLICABLE, f"disabled for this model ({PARAMS_FILE}: catalog.{model}.skip)")
    if variant.generates != config.generates:
        kind = "text-generation" if variant.generates else "single-pass (non-generative)"
        return Skip(
            Kind.NOT_APPLICABLE,
            f"a {kind} variant; {model} is {'a text-generation' if config.generates else 'not a text-generation'} "
            "model",
        )
    if variant.sources is not None and config.source not in variant.sources:
        return Skip(
            Kind.NOT_APPLICABLE,
            f"needs a {' or '.join(sorted(variant.sources))} source; {model} is a {config.source} model",
        )
    if target is None:
        return Skip(
            Kind.UNAVAILABLE, f"runs on {variant.device}; {PARAMS_FILE}: targets names no {variant.device} target"
        )
    if not probe.get("available"):
        return Skip(
            Kind.UNAVAILABLE,
            f"target {target} is not usable here: {probe.get('reason', 'not probed (reports/env.json)')}",
        )
    missing = unavailable_reason(variant.runtime, target)
    return Skip(Kind.UNAVAILABLE, missing) if missing else None
