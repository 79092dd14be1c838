"""OpenVINO on the CPU plugin.

Latency and the throughput sweep: one synchronous infer request on a model compiled with the
LATENCY hint, like every other runtime. Concurrent throughput: a second compilation with the
THROUGHPUT hint behind an AsyncInferQueue of the plugin's optimal number of requests. Model caching (CACHE_DIR) is on:
`load_ms` is a cold compile into an empty cache, `cached_load_ms` a fresh Core loading from it.
The build's `inference_precision` ('f32', 'bf16', 'f16' or 'auto', the plugin's choice) is passed
as INFERENCE_PRECISION_HINT, and the precision the plugin actually used is reported; its
`dynamic_quantization_group_size` (openvino_int8_dynamic: activations quantized per group at run
time) as DYNAMIC_QUANTIZATION_GROUP_SIZE.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import openvino as ov

from pipeline.core import bfloat16
from pipeline.core.data import Arrays
from pipeline.runtimes import base
from pipeline.runtimes.base import OpTime, Session

DEVICE = "CPU"


class Config(base.Config):
    """What the OpenVINO adapter reads of its build's runtime_config (beside layout and code_root)."""

    inference_precision: str | None = None  # the CPU plugin's INFERENCE_PRECISION_HINT ("auto": the plugin's)
    dynamic_quantization_group_size: int | None = None


class Details(base.Details):
    """What its sessions report (Session.details); None in a record written before the key was."""

    device: str | None = None
    inference_precision_requested: str | None = None
    inference_num_threads: int | None = None
    dynamic_quantization_group_size: int | None = None
    latency_hint_streams: int | None = None
    execution_devices: str | None = None


def compile_properties(hint: str, threads: int, precision: str, group_size: int | None = None) -> dict[str, Any]:
    properties: dict[str, Any] = {"PERFORMANCE_HINT": hint, "INFERENCE_NUM_THREADS": threads}
    if precision != "auto":
        properties["INFERENCE_PRECISION_HINT"] = precision
    if group_size is not None:
        properties["DYNAMIC_QUANTIZATION_GROUP_SIZE"] = group_size
    return properties


def ports(inputs: Arrays, names: list[str]) -> dict[int, np.ndarray]:
    """Inputs by port index: front ends name inputs differently, the spec's order is stable."""
    # np.ascontiguousarray makes a 0-d array (a scalar input) 1-d: np.require keeps its shape
    return {i: np.require(inputs[name], requirements="C") for i, name in enumerate(names)}


def infer(request: ov.InferRequest, compiled: ov.CompiledModel, names: list[str], inputs: Arrays) -> Arrays:
    """One synchronous call: outputs by name, copied out of the request's buffers. bfloat16 ports take
    and give float32 (pipeline.core.bfloat16): numpy has no bfloat16, and OpenVINO would read a float32
    array's bytes as bfloat16 ones and hands bfloat16 results out labelled float16."""
    feeds: dict[int, Any] = ports(inputs, names)
    for index, port in enumerate(compiled.inputs):
        if port.get_element_type() == ov.Type.bf16:
            bits = bfloat16.from_float32(feeds[index])
            feeds[index] = ov.Tensor(bits, list(bits.shape), ov.Type.bf16)
    results = request.infer(feeds)
    return {
        port.any_name: bfloat16.to_float32(np.array(results[port]).view(np.uint16))
        if port.get_element_type() == ov.Type.bf16
        else np.array(results[port])
        for port in compiled.outputs
    }


class OpenVinoSession(Session):
    def __init__(self, path: Path, threads: int, config: Config) -> None:
        self._path, self._threads = path, threads
        self._precision = config.inference_precision or "auto"
        self._group_size = config.dynamic_quantization_group_size
        self._cache = tempfile.mkdtemp(prefix="ov-cache-")
        self._compiled = self._compile("LATENCY", ov.Core())
        self._request = self._compiled.create_infer_request()
        self._requests: list[ov.InferRequest] = []
        self.input_names = [port.any_name for port in self._compiled.inputs]
        self.output_names = [port.any_name for port in self._compiled.outputs]

    def __del__(self) -> None:
        shutil.rmtree(getattr(self, "_cache", ""), ignore_errors=True)

    def _compile(self, hint: str, core: ov.Core) -> ov.CompiledModel:
        core.set_property({"CACHE_DIR": self._cache})
        return core.compile_model(
            str(self._path), DEVICE, compile_properties(hint, self._threads, self._precision, self._group_size)
        )

    def run(self, inputs: Arrays) -> Arrays:
        return infer(self._request, self._compiled, self.input_names, inputs)

    def prepare(self, inputs: Arrays) -> Callable[[], Any]:
        """A request of its own with the inputs bound: preparing another batch (the sweep) must not
        change what an earlier prepared call runs."""
        request = self._compiled.create_infer_request()
        for index, array in ports(inputs, self.input_names).items():
            request.set_input_tensor(index, ov.Tensor(array))
        # Kept for the session's life: destroying a used request and then inferring on another of the
        # same compiled model corrupted the heap (SIGSEGV / "corrupted double-linked list" in
        # about 4 of 5 bench processes, OpenVINO 2026.4.1 CPU plugin, amd-25-1-2c).
        self._requests.append(request)
        return request.infer

    def request_sessions(self, requests: int, threads: int) -> tuple[list[Session], str]:
        """OpenVINO's way to serve requests arriving at once (a server's instances): the model
        compiled with the THROUGHPUT hint, this session's threads split into the plugin's streams,
        an infer request per stream (`requests` and `threads` are the plugin's to decide, as in
        `async_queue`)."""
        compiled = self._compile("THROUGHPUT", ov.Core())
        count = int(compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
        streams = int(compiled.get_property("NUM_STREAMS"))
        sessions: list[Session] = [OpenVinoRequest(compiled, self.input_names) for _ in range(count)]
        return sessions, f"{count} infer requests on {streams} streams (THROUGHPUT hint, {self._threads} threads)"

    def async_queue(self, inputs: Arrays, requests: int, threads: int) -> OpenVinoQueue:
        """OpenVINO's own way to serve many requests: a model compiled with the THROUGHPUT hint
        (the same `threads` in all, split into the plugin's streams) and an AsyncInferQueue of the
        plugin's optimal number of requests (`requests` is ignored: the streams decide)."""
        compiled = self._compile("THROUGHPUT", ov.Core())
        return OpenVinoQueue(compiled, ports(inputs, self.input_names))

    def op_times(self, inputs: Arrays, calls: int) -> list[OpTime]:
        """OpenVINO's per-layer counters (PERF_COUNT) on a second compilation: executed layers only,
        with the kernel each ran (e.g. brgconv_avx512_amx_I8: an AMX INT8 convolution)."""
        properties = compile_properties("LATENCY", self._threads, self._precision, self._group_size)
        properties["PERF_COUNT"] = True
        request = ov.Core().compile_model(str(self._path), DEVICE, properties).create_infer_request()
        times = []
        for _ in range(calls):
            request.infer(ports(inputs, self.input_names))
            times += [
                OpTime(info.node_type, info.real_time.total_seconds() * 1000, info.exec_type)
                for info in request.profiling_info
                if info.status == ov.ProfilingInfo.Status.EXECUTED
            ]
        return times

    def load_from_cache(self) -> bool:
        """Compile the model again in a new Core, from the cache the first load filled."""
        self._compile("LATENCY", ov.Core())
        return True

    def details(self) -> dict[str, Any]:
        return Details.model_validate(
            {
                "device": DEVICE,
                "inference_precision": self._compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name(),
                "inference_precision_requested": self._precision,
                "inference_num_threads": int(self._compiled.get_property("INFERENCE_NUM_THREADS")),
                "dynamic_quantization_group_size": int(self._compiled.get_property("DYNAMIC_QUANTIZATION_GROUP_SIZE")),
                "latency_hint_streams": int(self._compiled.get_property("NUM_STREAMS")),
                "execution_devices": ", ".join(self._compiled.get_property("EXECUTION_DEVICES")),
            }
        ).as_dict()


class OpenVinoRequest(Session):
    """One infer request of a compiled model: a session for one request thread at a time."""

    def __init__(self, compiled: ov.CompiledModel, input_names: list[str]) -> None:
        self._compiled, self._request = compiled, compiled.create_infer_request()
        self.input_names = input_names
        self.output_names = [port.any_name for port in compiled.outputs]

    def run(self, inputs: Arrays) -> Arrays:
        return infer(self._request, self._compiled, self.input_names, inputs)


class OpenVinoQueue:
    """AsyncInferQueue with every request's inputs bound once (as `prepare` does)."""

    def __init__(self, compiled: ov.CompiledModel, ports: dict[int, np.ndarray]) -> None:
        self._compiled = compiled
        self.requests = int(compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
        self._queue = ov.AsyncInferQueue(compiled, self.requests)
        tensors = {index: ov.Tensor(array) for index, array in ports.items()}
        for request in range(len(self._queue)):
            for index, tensor in tensors.items():
                self._queue[request].set_input_tensor(index, tensor)
        self.submit = self._queue.start_async  # blocks while every request is busy

    def wait_all(self) -> None:
        self._queue.wait_all()

    def details(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "streams": int(self._compiled.get_property("NUM_STREAMS")),
            "threads": int(self._compiled.get_property("INFERENCE_NUM_THREADS")),
            "how": "OpenVINO AsyncInferQueue, THROUGHPUT hint: the threads split into streams",
        }


def load(artifact: Path, threads: int, config: Config, target: str = "cpu") -> OpenVinoSession:
    return OpenVinoSession(artifact, threads, config)
