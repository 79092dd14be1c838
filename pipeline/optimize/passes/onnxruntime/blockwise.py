"""onnx_int8_blockwise: ONNX Runtime's MatMulNBits, 8-bit block-wise weights, activations quantized
at run time (onnxruntime.quantization.matmul_nbits_quantizer, nothing hand-written).

Static INT8 fixes one scale per activation tensor from calibration rows; a pretrained transformer's
activations carry per-token outliers that one scale cannot hold. Here only the weights are fixed
(INT8, one scale per `block_size` values of a column); with `accuracy_level: 4` the CPU kernel
quantizes each block of the activations to INT8 at run time and multiplies in INT8 (on CPUs where
ORT has that kernel; else it dequantizes the weights and computes in float). The pass checks which
happened on this CPU, never assumes it: the same model with `accuracy_level: 1` (float compute)
must give different outputs on a calibration row. Only MatMuls with constant weights are rewritten
(transformers, MLPs exported as MatMul); convolutions and Gemm stay float, so a CNN gets little
and a graph without such MatMuls is recorded as not applicable.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from pipeline.core import onnx_files
from pipeline.core.errors import NotApplicable
from pipeline.optimize.passes.base import (
    BuildContext,
    BuildResult,
    NoConfig,
    Pass,
    run_time_quantization,
    session_runner,
)
from pipeline.optimize.passes.onnxruntime.export import MODEL_FILE
from pipeline.optimize.passes.onnxruntime.quantize_recipe import is_external

FLOAT_COMPUTE = 1  # MatMulNBits accuracy_level 1: dequantize the weights, multiply in FP32


class BlockwiseConfig(NoConfig):
    block_size: int = Field(default=128, ge=16)  # weights per scale along a column (a power of 2, >= 16)
    accuracy_level: Literal[1, 2, 3, 4] = 4  # the activations' compute type: 1 fp32, 2 fp16, 3 bf16, 4 int8
    is_symmetric: bool = True  # symmetric weights (no zero points)

    @field_validator("block_size")
    @classmethod
    def _power_of_two(cls, size: int) -> int:
        if size & (size - 1):
            raise ValueError(f"{size} is not a power of 2")
        return size


class MatMulNBits8(Pass):
    Config = BlockwiseConfig

    def run(self, ctx: BuildContext, config: BlockwiseConfig) -> BuildResult:
        import onnx
        from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

        quantizer = MatMulNBitsQuantizer(
            str(ctx.exported_onnx),
            bits=8,
            block_size=config.block_size,
            is_symmetric=config.is_symmetric,
            accuracy_level=config.accuracy_level,
            op_types_to_quantize=("MatMul",),
        )
        logging.getLogger(MatMulNBitsQuantizer.__module__).setLevel(logging.WARNING)  # a line per node otherwise
        quantizer.process()
        model: onnx.ModelProto = quantizer.model.model
        rewritten = sum(node.op_type == "MatMulNBits" for node in model.graph.node)
        if not rewritten:
            raise NotApplicable(
                "no MatMul with constant 2-D weights in the ONNX export (convolutions and Gemm stay float): "
                "nothing to quantize block-wise"
            )
        path = ctx.out_dir / MODEL_FILE
        onnx_files.save(model, path, external=is_external(ctx))
        stats = onnx_files.graph_stats(path)
        return BuildResult(
            MODEL_FILE,
            {
                "bits": 8,
                "block_size": config.block_size,
                "accuracy_level": config.accuracy_level,
                "is_symmetric": config.is_symmetric,
                "matmuls_rewritten": rewritten,
                "matmuls_left_float": sum(node.op_type == "MatMul" for node in model.graph.node),
                "nodes": stats["nodes"],
                "top_ops": stats["top_ops"],
                **self._check(ctx, model, path, config),
            },
        )

    @staticmethod
    def _check(ctx: BuildContext, model: Any, path: Path, config: BlockwiseConfig) -> dict[str, Any]:
        """Whether ORT quantized the activations on this CPU: outputs against the same weights with
        float compute (accuracy_level 1), on one calibration batch."""
        if config.accuracy_level == FLOAT_COMPUTE:
            return {"activations_quantized_at_run_time": False, "activations_check": "accuracy_level 1: float compute"}
        import onnx

        twin = onnx.ModelProto()
        twin.CopyFrom(model)
        for node in twin.graph.node:
            if node.op_type == "MatMulNBits":
                for attribute in node.attribute:
                    if attribute.name == "accuracy_level":
                        attribute.i = FLOAT_COMPUTE
        with tempfile.TemporaryDirectory(dir=ctx.out_dir) as scratch:
            twin_path = Path(scratch) / MODEL_FILE
            onnx_files.save(twin, twin_path, external=is_external(ctx))
            run, twin_run = (session_runner("onnxruntime", p, ctx.layout) for p in (path, twin_path))
            return run_time_quantization(ctx, run, twin_run, "accuracy_level 1")
