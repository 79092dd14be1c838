"""What a target has here: probed once per `dvc repro` by the env stage, in a child process (a CUDA
or TensorRT library can take a process down on a machine without a driver), and written to
reports/env.json, which every build and benchmark depends on. A variant whose target is absent or
unusable is `skipped` with the probe's reason; the CPU variants run as usual.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import importlib.util
from pathlib import Path
from typing import Any

from pipeline.core.onnx_files import external_files as external_weights
from pipeline.core.records import env as records_env
from pipeline.core.records.env import Probe
from pipeline.core.targets import Target

PROBE_TIMEOUT_S = 120


def probe(name: str) -> dict[str, Any]:
    """{"available": bool, "reason": why not, and for GPUs name / driver / compute capability}.

    GPU probes run in a child process (pipeline.core.isolate), so a crashing driver library is a reason,
    not a dead pipeline."""
    target = Target.parse(name)
    if target.kind == "cpu":
        return {"available": True, "reason": ""}
    if not Path("/proc/driver/nvidia/version").exists() and ctypes.util.find_library("cuda") is None:
        return {
            "available": False,
            "reason": "no NVIDIA driver (no /proc/driver/nvidia, no libcuda)",
        }
    from pipeline.core.isolate import IsolatedFailure, call

    try:
        return call("pipeline.machine.probe:probe_cuda", {"index": target.index}, timeout=PROBE_TIMEOUT_S)
    except IsolatedFailure as failure:
        return {"available": False, "reason": f"the GPU probe failed: {failure}"}


def probe_cuda(index: int) -> dict[str, Any]:
    """Child side: the NVIDIA driver, nvidia-ml-py and device `index`, checked in that order."""
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError as error:
        return {"available": False, "reason": f"no NVIDIA driver: libcuda.so.1 cannot be loaded ({error})"}
    if importlib.util.find_spec("pynvml") is None:
        return {"available": False, "reason": "nvidia-ml-py is not installed (pip install -e '.[gpu]')"}
    import pynvml

    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as error:
        return {"available": False, "reason": f"NVML cannot start: {error}"}
    count = pynvml.nvmlDeviceGetCount()
    if index >= count:
        return {"available": False, "reason": f"cuda:{index} requested, {count} CUDA device(s) present"}
    return {"available": True, "reason": "", **gpu_facts(index)}


def gpu_facts(index: int) -> dict[str, Any]:
    """Name, driver and compute capability of GPU `index` (NVML initialised), for the metrics."""
    import pynvml

    handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
    return {
        "gpu": pynvml.nvmlDeviceGetName(handle),
        "driver": pynvml.nvmlSystemGetDriverVersion(),
        "compute_capability": f"{major}.{minor}",
        "memory_mb": pynvml.nvmlDeviceGetMemoryInfo(handle).total / 1e6,
    }


def probe_all(targets: list[str]) -> dict[str, Probe]:
    return {str(Target.parse(name)): Probe.model_validate(probe(name)) for name in targets}


def recorded_probe(target: str, root: Path = Path(".")) -> Probe:
    """The env stage's probe of `target` (in reports/env.json under `root`, which builds and
    benchmarks depend on); probed now when the file has none (a stage run by hand)."""
    env = records_env.load(root)
    recorded = env.targets.get(target) if env else None
    return recorded or Probe.model_validate(probe(target))


def engine_cache_key(model: Path, tensorrt_version: str, gpu: Probe) -> str:
    """A TensorRT engine is valid for one model, one TensorRT version and one GPU model: the key
    names all four (the model's bytes, external weights included), so a changed one never loads."""
    digest = hashlib.sha256()
    for path in [model, *external_weights(model)]:
        digest.update(path.read_bytes())
    facts = f"trt={tensorrt_version};gpu={gpu.gpu};cc={gpu.compute_capability}"
    digest.update(facts.encode())
    return digest.hexdigest()[:16]
