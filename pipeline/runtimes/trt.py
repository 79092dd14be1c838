"""TensorRT engines (tensorrt_fp16, tensorrt_int8) on a CUDA stream, with cuda-python for memory.

An engine is valid for one TensorRT version and one GPU model: engine.json records both and the
key they were built under, and loading on anything else is an error that says so (rebuild on
this target). A call copies the inputs to the device, enqueues the engine on the session's stream,
copies the outputs back and synchronizes the stream: the same numpy-in, numpy-out work as ONNX
Runtime's `session.run` on the CUDA provider, so their latencies compare like for like.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import tensorrt as trt
from cuda.bindings import runtime as cudart

from pipeline.core.data import Arrays
from pipeline.core.records import engine as engine_entry
from pipeline.core.records.env import Probe
from pipeline.runtimes import base
from pipeline.runtimes.base import Session

Config = base.Config  # no load settings of its own


class Details(base.Details):
    """What its sessions report (Session.details); None in a record written before the key was."""

    tensorrt: str | None = None  # its version
    stream: str | None = None


def check(result: tuple[Any, ...]) -> Any:
    """cuda-python returns (error, value...): raise on an error, return the value(s)."""
    error, *values = result
    if error != cudart.cudaError_t.cudaSuccess:
        raise RuntimeError(f"CUDA error {error}")
    return values[0] if len(values) == 1 else tuple(values) or None


def release(pointers: list[int], stream: Any) -> None:
    for pointer in pointers:
        cudart.cudaFree(pointer)
    cudart.cudaStreamDestroy(stream)


def unavailable_on(target: str) -> str | None:
    count = check(cudart.cudaGetDeviceCount())
    index = int(target.partition(":")[2] or 0)
    return None if index < count else f"CUDA runtime sees {count} device(s), {target} asked for"


class TrtSession(Session):
    def __init__(self, entry: Path, target: str) -> None:
        from pipeline.machine.probe import probe_cuda

        facts = engine_entry.load(entry)
        index = int(target.partition(":")[2] or 0)
        gpu = Probe.model_validate(probe_cuda(index))
        built_for, here = facts.built_for, (trt.__version__, gpu.gpu, gpu.compute_capability)
        if built_for != here:
            raise RuntimeError(
                f"{entry}: engine built for TensorRT {built_for[0]} on {built_for[1]} (sm {built_for[2]}), "
                f"this is TensorRT {here[0]} on {here[1]} (sm {here[2]}): rebuild it on this target"
            )
        check(cudart.cudaSetDevice(index))
        self._logger = trt.Logger(trt.Logger.WARNING)
        self._engine = trt.Runtime(self._logger).deserialize_cuda_engine((entry.parent / facts.engine).read_bytes())
        self.input_names, self.output_names = facts.inputs, facts.outputs

    def prepare(self, inputs: Arrays) -> Callable[[], Any]:
        """A call with its own execution context, stream and device buffers, so that prepared calls
        can run concurrently (one per request in flight); the device memory goes with the call."""
        to_device, to_host = cudart.cudaMemcpyKind.cudaMemcpyHostToDevice, cudart.cudaMemcpyKind.cudaMemcpyDeviceToHost
        context = self._engine.create_execution_context()
        stream = check(cudart.cudaStreamCreate())
        host_in = {n: np.require(inputs[n], requirements="C") for n in self.input_names}  # a 0-d input stays 0-d
        for name, array in host_in.items():
            context.set_input_shape(name, array.shape)
        host_out = {
            n: np.empty(tuple(context.get_tensor_shape(n)), trt.nptype(self._engine.get_tensor_dtype(n)))
            for n in self.output_names
        }
        device = {n: check(cudart.cudaMalloc(a.nbytes)) for n, a in (host_in | host_out).items()}
        for name, pointer in device.items():
            context.set_tensor_address(name, pointer)
        copies_in = [(device[n], a) for n, a in host_in.items()]
        copies_out = [(a, device[n]) for n, a in host_out.items()]

        def call() -> Arrays:
            for pointer, array in copies_in:
                check(cudart.cudaMemcpyAsync(pointer, array.ctypes.data, array.nbytes, to_device, stream))
            if not context.execute_async_v3(stream):
                raise RuntimeError("TensorRT execute_async_v3 failed")
            for array, pointer in copies_out:
                check(cudart.cudaMemcpyAsync(array.ctypes.data, pointer, array.nbytes, to_host, stream))
            check(cudart.cudaStreamSynchronize(stream))
            return host_out

        weakref.finalize(call, release, list(device.values()), stream)
        return call

    def run(self, inputs: Arrays) -> Arrays:
        return {n: a.copy() for n, a in self.prepare(inputs)().items()}

    def details(self) -> dict[str, Any]:
        return Details.model_validate(
            {"tensorrt": trt.__version__, "stream": "a CUDA stream per prepared call, synchronized per call"}
        ).as_dict()


def load(artifact: Path, threads: int, config: Config, target: str = "cuda:0") -> TrtSession:
    return TrtSession(artifact, target)
