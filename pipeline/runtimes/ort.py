"""ONNX Runtime on the CPU, CUDA or TensorRT execution provider.

The provider follows the target and the build's runtime_config (`provider`: cuda | tensorrt, with
`fp16` / `int8` for TensorRT). A session that does not run on the provider asked for is an error,
never a silent CPU fallback: `get_providers()[0]` is checked after loading. On a GPU the timed call
is `session.run` with numpy arrays, so latency includes the host-device copies a numpy caller pays,
and it is synchronous (outputs are on the host when it returns).
TensorRT's engine and timing caches live in the artifact folder under `trt_cache/<key>`, keyed by
model, TensorRT version and GPU (pipeline.machine.probe.engine_cache_key): the build's load check
builds the engine once, and the benchmark loads it from there.
"""

from __future__ import annotations

import ctypes
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import numpy as np
import onnxruntime as ort

from pipeline.core import bfloat16, onnx_files
from pipeline.core.data import Arrays
from pipeline.core.records.env import Probe
from pipeline.runtimes import base
from pipeline.runtimes.base import OpTime, Session


class Config(base.Config):
    """What the ONNX Runtime adapter reads of its build's runtime_config (beside layout and code_root)."""

    provider: Literal["cuda", "tensorrt"] | None = None  # on a GPU target: CUDA, or TensorRT before it
    fp16: bool | None = None  # TensorRT execution provider precisions
    int8: bool | None = None
    trt_profile_min_shapes: str | None = None
    trt_profile_opt_shapes: str | None = None
    trt_profile_max_shapes: str | None = None
    trt_builder_optimization_level: int | None = None
    trt_max_workspace_size: int | None = None


class Details(base.Details):
    """What its sessions report (Session.details); None in a record written before the key was."""

    provider: str | None = None  # the execution provider the session runs on
    target: str | None = None
    intra_op_threads: int | None = None
    graph_optimization: str | None = None  # the session's graph optimization level (Triton's optimization.graph.level)


def session_options(threads: int) -> ort.SessionOptions:
    options = onnx_files.session_options()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return options


ONNX_BFLOAT16 = 16  # onnx.TensorProto.BFLOAT16 (the lean serving image has no onnx package)
PROVIDERS = {"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider", "tensorrt": "TensorrtExecutionProvider"}
CACHE_DIR = "trt_cache"


def graph_as_run(path: Path, threads: int = 1) -> Any:
    """The graph the CPU provider runs for the file at `path`, as an onnx.ModelProto: the session's save
    of it after its optimizations at load (`optimized_model_filepath`, at ORT_ENABLE_ALL), weights inline."""
    import onnx  # here, not at the top: the lean serving image has ONNX Runtime, not the onnx package

    with tempfile.TemporaryDirectory(prefix="ort-optimized-") as folder:
        options = session_options(threads)
        options.optimized_model_filepath = str(Path(folder) / "optimized.onnx")
        options.log_severity_level = 3
        ort.InferenceSession(str(path), options, providers=[PROVIDERS["cpu"]])
        return onnx.load(options.optimized_model_filepath, load_external_data=False)


def providers(path: Path, target: str, config: Config) -> list[Any]:
    """The provider list for `target`: the one asked for first, then CUDA and CPU for the nodes it
    leaves (ONNX Runtime assigns each node to the first provider that takes it)."""
    if target == "cpu":
        return [PROVIDERS["cpu"]]
    device = {"device_id": int(target.partition(":")[2] or 0)}
    chain: list[Any] = [(PROVIDERS["cuda"], device), PROVIDERS["cpu"]]
    if config.provider == "tensorrt":
        chain.insert(0, (PROVIDERS["tensorrt"], device | tensorrt_options(path, target, config)))
    return chain


def tensorrt_options(path: Path, target: str, config: Config) -> dict[str, Any]:
    from pipeline.machine.probe import engine_cache_key, probe_cuda

    gpu = Probe.model_validate(probe_cuda(int(target.partition(":")[2] or 0)))
    cache = path.parent / CACHE_DIR / engine_cache_key(path, tensorrt_version(), gpu)
    cache.mkdir(parents=True, exist_ok=True)
    return {
        "trt_fp16_enable": bool(config.fp16),
        "trt_int8_enable": bool(config.int8),  # with a QDQ model: explicit scales, no calibration table
        "trt_engine_cache_enable": True,
        "trt_engine_cache_path": str(cache),
        "trt_timing_cache_enable": True,
        "trt_timing_cache_path": str(cache),
        **{k: v for k, v in config.as_dict().items() if k.startswith("trt_")},  # the build's profile shapes, workspace
    }


def tensorrt_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("tensorrt")
    except metadata.PackageNotFoundError:
        return "bundled with onnxruntime-gpu"


def unavailable_on(target: str) -> str | None:
    """ONNX Runtime's CUDA provider must be compiled in (the onnxruntime-gpu package); whether a
    session really runs on it is checked when one loads."""
    if PROVIDERS["cuda"] not in ort.get_available_providers():
        return f"this onnxruntime ({ort.__version__}) has no CUDA execution provider: install onnxruntime-gpu"
    return None


class OrtSession(Session):
    def __init__(self, path: Path, threads: int, target: str = "cpu", config: Config | None = None) -> None:
        config = config or Config()
        self._path, self._target, self._providers = path, target, providers(path, target, config)
        self._session = self._load(session_options(threads))
        self.input_names = [i.name for i in self._session.get_inputs()]
        self.output_names = [o.name for o in self._session.get_outputs()]
        self._threads, self._config = threads, config
        ports = [*self._session.get_inputs(), *self._session.get_outputs()]
        self._bfloat16 = {port.name for port in ports if port.type == "tensor(bfloat16)"}

    def _load(self, options: ort.SessionOptions) -> ort.InferenceSession:
        session = ort.InferenceSession(str(self._path), options, providers=self._providers)
        wanted = self._providers[0] if isinstance(self._providers[0], str) else self._providers[0][0]
        if session.get_providers()[0] != wanted:
            raise RuntimeError(f"asked ONNX Runtime for {wanted}, the session runs on {session.get_providers()[0]}")
        return session

    def run(self, inputs: Arrays) -> Arrays:
        if self._bfloat16:
            return self._run_bfloat16(inputs)
        return dict(zip(self.output_names, self._session.run(self.output_names, inputs), strict=True))

    def _run_bfloat16(self, inputs: Arrays) -> Arrays:
        """A model with bfloat16 tensors, in float32 (pipeline.core.bfloat16): ONNX Runtime's numpy door has
        no bfloat16, so those go in as OrtValues of the rounded bits and come out read from their buffer."""
        feeds = {
            name: ort.OrtValue.ortvalue_from_numpy_with_onnx_type(bfloat16.from_float32(value), ONNX_BFLOAT16)
            if name in self._bfloat16
            else ort.OrtValue.ortvalue_from_numpy(np.require(value, requirements="C"))
            for name, value in inputs.items()
        }
        values = self._session.run_with_ort_values(self.output_names, feeds)
        return {
            name: _bfloat16_output(value) if name in self._bfloat16 else value.numpy()
            for name, value in zip(self.output_names, values, strict=True)
        }

    def prepare(self, inputs: Arrays) -> Callable[[], Any]:
        run, names, feeds = self._session.run, self.output_names, dict(inputs)
        return lambda: run(names, feeds)

    def request_sessions(self, requests: int, threads: int) -> tuple[list[Session], str]:
        """A session per request, each with its share of the threads (intra-op pools are per session)."""
        share = max(1, threads // requests)
        sessions: list[Session] = [OrtSession(self._path, share, self._target, self._config) for _ in range(requests)]
        return sessions, f"{requests} sessions of {share} intra-op thread(s), one per request thread"

    def executed_precision(self) -> str | None:
        """What an FP16 file computes in on this provider, read from ONNX Runtime's optimized graph:
        the CPU provider has few FP16 kernels and runs FP32 ones behind inserted Casts (or folds
        FP16 weights back to FP32), so the weights its compute operators take say what ran."""
        import onnx  # the bench's question: the lean serving image has ONNX Runtime, not the onnx package

        if self._target != "cpu" or not _has_fp16_weights(self._path):
            return None
        graph = graph_as_run(self._path, self._threads).graph
        weights = {i.name: i.data_type for i in graph.initializer}
        compute = [weights[i] for n in graph.node if n.op_type in COMPUTE_OPS for i in n.input if i in weights]
        casts = sum(n.op_type == "Cast" for n in graph.node)
        if compute and onnx.TensorProto.FLOAT16 not in compute:
            return f"fp32 (fp16 storage, fp32 compute: {len(compute)} weights of compute ops in fp32, {casts} Casts)"
        return None

    def op_times(self, inputs: Arrays, calls: int) -> list[OpTime]:
        """ONNX Runtime's own profiler (enable_profiling) on a second session: kernel time per node."""
        options = session_options(self._threads)
        options.enable_profiling = True
        with tempfile.TemporaryDirectory(prefix="ort-profile-") as folder:
            options.profile_file_prefix = str(Path(folder) / "ort")
            session = self._load(options)
            for _ in range(calls):
                session.run(None, inputs)
            trace = json.loads(Path(session.end_profiling()).read_text())
        return [
            OpTime(event["args"].get("op_name", "?"), event["dur"] / 1000)
            for event in trace
            if event.get("cat") == "Node" and event.get("name", "").endswith("_kernel_time")
        ]

    def details(self) -> dict[str, Any]:
        executed = self.executed_precision()
        return Details.model_validate(
            {
                "provider": self._session.get_providers()[0],
                "target": self._target,
                "intra_op_threads": self._threads,
                "graph_optimization": "all",
                **({"inference_precision": executed} if executed else {}),
            }
        ).as_dict()


# Operators whose weights decide the arithmetic (ORT's fused and contrib forms included).
COMPUTE_OPS = frozenset(
    {
        "Conv",
        "ConvTranspose",
        "MatMul",
        "Gemm",
        "FusedConv",
        "FusedGemm",
        "FusedMatMul",
        "NhwcFusedConv",
        "Attention",
        "MultiHeadAttention",
        "GroupQueryAttention",
    }
)


def _has_fp16_weights(path: Path) -> bool:
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    return any(i.data_type == onnx.TensorProto.FLOAT16 for i in graph.initializer)


def load(artifact: Path, threads: int, config: Config, target: str = "cpu") -> OrtSession:
    return OrtSession(artifact, threads, target, config)


def _bfloat16_output(value: ort.OrtValue) -> np.ndarray:
    """A bfloat16 OrtValue (in host memory) as float32: OrtValue.numpy() refuses bfloat16."""
    shape = value.shape()
    count = int(np.prod(shape))
    if not count:
        return np.zeros(shape, np.float32)
    bits = np.ctypeslib.as_array((ctypes.c_uint16 * count).from_address(value.data_ptr()))
    return bfloat16.to_float32(bits.reshape(shape).copy())
