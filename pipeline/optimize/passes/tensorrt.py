"""TensorRT variants, for NVIDIA GPU targets.

- onnx_trt_fp16 / onnx_trt_int8: ONNX Runtime's TensorRT execution provider. The artifact is the
  ONNX model (the export, or the QDQ INT8 model) and the provider options; the build's load check
  builds the engine into the artifact's `trt_cache/<key>` (pipeline.runtimes.ort), so the
  benchmark and a deployment load it instead of rebuilding.
- tensorrt_fp16 / tensorrt_int8: an engine built with the `tensorrt` API (OnnxParser, a strongly
  typed network, one optimization profile), serialized as the artifact with the facts it is valid
  for. FP16 comes from onnx_fp16's graph: TensorRT 11 has no FP16 builder flag any more.

INT8 is explicit quantization: the QDQ model of onnx_int8_static's recipe, made TensorRT-ready
(symmetric INT8 activations and weights, no reduced range), carries the scales; no calibration
table. Every symbolic input dimension gets an optimization profile from the input spec
(`profile_shapes`): batch 1 to the largest batch the benchmark sweeps, each other symbolic
dimension over the values the benchmark uses (its `dims` and `dim_sweep`), optimal at `dims`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from pipeline.core.config import InputSpec
from pipeline.core.records import engine as engine_entry
from pipeline.core.records.engine import EngineEntry
from pipeline.core.records.env import Probe
from pipeline.optimize.passes.base import BuildContext, BuildResult, NoConfig, Pass
from pipeline.optimize.passes.onnxruntime.export import MODEL_FILE, AsExported
from pipeline.optimize.passes.onnxruntime.fp16 import Float16, Float16Config
from pipeline.optimize.passes.onnxruntime.quantize_static import StaticConfig, StaticInt8

ENGINE, ENGINE_INFO = "model.engine", "engine.json"
Shape = tuple[int, ...]


class TensorRtConfig(NoConfig):
    workspace_mb: int = Field(default=4096, ge=64)
    optimization_level: int = Field(default=3, ge=0, le=5)
    # The optimization profile's largest batch, capped by what fits the export's memory budget. A knob
    # of the pass, not read from `bench`: a build depends on its own params only.
    max_batch: int = Field(default=128, ge=1)


class TensorRtFp16Config(Float16Config, TensorRtConfig):
    pass


class TensorRtQdqConfig(StaticConfig, TensorRtConfig):
    """onnx_int8_static's knobs, with TensorRT's requirements as defaults: symmetric INT8."""

    activation_type: Any = "qint8"
    reduce_range: Any = False
    extra_options: dict[str, Any] = Field(
        default_factory=lambda: {"ActivationSymmetric": True, "WeightSymmetric": True}
    )


def profile_shapes(
    inputs: dict[str, InputSpec],
    dims: dict[str, int],
    dim_sweep: dict[str, list[int]],
    max_batch: int,
    fixed_batch: int | None,
) -> dict[str, tuple[Shape, Shape, Shape]]:
    """(min, opt, max) per input: the batch axis 1 / 1 / max_batch (a fixed batch stays fixed),
    other symbolic axes from the smallest to the largest value the benchmark uses, optimal at
    the value latency is measured at; fixed axes as they are."""
    shapes = {}
    for name, spec in inputs.items():
        low, opt, high = [], [], []
        for axis, dim in enumerate(spec.shape):
            if isinstance(dim, int):
                values = [dim]
            elif axis == 0:
                values = [fixed_batch] if fixed_batch else [1, max_batch]
            else:
                values = [dims[dim], *dim_sweep.get(dim, [])]
            low.append(min(values))
            high.append(max(values))
            opt.append(dims.get(dim, 1) if isinstance(dim, str) and axis > 0 else min(values))
        shapes[name] = (tuple(low), tuple(opt), tuple(high))
    return shapes


def ort_profile_options(shapes: dict[str, tuple[Shape, Shape, Shape]]) -> dict[str, str]:
    """The TensorRT execution provider's explicit profile: `name:1x64,name2:1x64` per bound."""

    def bound(i: int) -> str:
        return ",".join(f"{name}:{'x'.join(map(str, s[i]))}" for name, s in shapes.items())

    return {"trt_profile_min_shapes": bound(0), "trt_profile_opt_shapes": bound(1), "trt_profile_max_shapes": bound(2)}


def shapes_for(ctx: BuildContext, config: TensorRtConfig) -> dict[str, tuple[Shape, Shape, Shape]]:
    max_batch = ctx.max_batch(config.max_batch)
    info = ctx.source_info
    return profile_shapes(info.inputs, info.dims, ctx.config.dim_sweep, max_batch, ctx.fixed_batch)


def with_profile(result: BuildResult, ctx: BuildContext, config: TensorRtConfig) -> BuildResult:
    shapes = shapes_for(ctx, config)
    result.runtime_config |= ort_profile_options(shapes) | {
        "trt_builder_optimization_level": config.optimization_level,
        "trt_max_workspace_size": config.workspace_mb * 2**20,
    }
    result.details |= {"profile_shapes": {k: [list(s) for s in v] for k, v in shapes.items()}}
    return result


class OrtTensorRt(Pass):
    Config = TensorRtConfig

    def run(self, ctx: BuildContext, config: TensorRtConfig) -> BuildResult:
        return with_profile(AsExported().run(ctx, NoConfig()), ctx, config)


class OrtTensorRtQdq(Pass):
    Config = TensorRtQdqConfig

    def run(self, ctx: BuildContext, config: TensorRtQdqConfig) -> BuildResult:
        return with_profile(StaticInt8().run(ctx, config), ctx, config)


def build_engine(ctx: BuildContext, onnx_path: Path, config: TensorRtConfig) -> BuildResult:
    """Parse `onnx_path` with TensorRT's OnnxParser into a strongly typed network and write the
    serialized engine, its profile and the facts it is valid for (engine_cache_key).

    Precision comes from the graph's own types, the only way TensorRT 11 has (its FP16/INT8
    builder flags and calibrators are gone) and the same under TensorRT 10 with STRONGLY_TYPED:
    FP16 from the FP16 ONNX graph, INT8 from the Q/DQ nodes."""
    import tensorrt as trt

    from pipeline.machine.probe import engine_cache_key, probe_cuda

    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    typed = getattr(trt.NetworkDefinitionCreationFlag, "STRONGLY_TYPED", None)
    network = builder.create_network(0 if typed is None else 1 << int(typed))
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(str(onnx_path)):  # external weights are read relative to the file
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise RuntimeError(f"TensorRT's ONNX parser refused {onnx_path.name}: {errors}")
    builder_config = builder.create_builder_config()
    builder_config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, config.workspace_mb * 2**20)
    builder_config.builder_optimization_level = config.optimization_level
    shapes = shapes_for(ctx, config)
    profile = builder.create_optimization_profile()
    for name, (low, opt, high) in shapes.items():
        profile.set_shape(name, low, opt, high)
    builder_config.add_optimization_profile(profile)
    engine = builder.build_serialized_network(network, builder_config)
    if engine is None:
        raise RuntimeError("TensorRT could not build an engine (its log is in the build log)")
    (ctx.out_dir / ENGINE).write_bytes(bytes(engine))
    gpu = Probe.model_validate(probe_cuda(int(ctx.target.partition(":")[2] or 0)))
    entry = EngineEntry(
        engine=ENGINE,
        tensorrt=trt.__version__,
        gpu=gpu.gpu,
        compute_capability=gpu.compute_capability,
        key=engine_cache_key(onnx_path, trt.__version__, gpu),
        inputs=list(shapes),
        outputs=ctx.source_info.output_names,
        profile_shapes={k: [list(s) for s in v] for k, v in shapes.items()},
    )
    engine_entry.write(entry, ctx.out_dir / ENGINE_INFO)
    for leftover in ctx.out_dir.glob(f"{MODEL_FILE}*"):  # the intermediate ONNX: the engine is the artifact
        leftover.unlink()
    return BuildResult(ENGINE_INFO, entry.model_dump(include={"tensorrt", "gpu", "compute_capability", "key"}))


class EngineFp16(Pass):
    """onnx_fp16's FP16 graph (FP32 inputs and outputs kept), built into an engine."""

    Config = TensorRtFp16Config

    def run(self, ctx: BuildContext, config: TensorRtFp16Config) -> BuildResult:
        fp16 = Float16().run(ctx, config)
        result = build_engine(ctx, ctx.out_dir / fp16.entry, config)
        result.details |= {"fp16": fp16.details}
        return result


class EngineInt8(Pass):
    """The QDQ INT8 model built into an engine: INT8 where the Q/DQ nodes say, float elsewhere."""

    Config = TensorRtQdqConfig

    def run(self, ctx: BuildContext, config: TensorRtQdqConfig) -> BuildResult:
        qdq = StaticInt8().run(ctx, config)
        result = build_engine(ctx, ctx.out_dir / qdq.entry, config)
        result.details |= {"qdq": qdq.details}
        result.rescues.extend(qdq.rescues)
        return result
