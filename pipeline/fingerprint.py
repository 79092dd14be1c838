"""The environment fingerprint: what a benchmark number depends on besides the model.

Written by an always-run DVC stage that every build and bench stage depends on: on another CPU
or with other library versions the file changes, so DVC reruns the benchmarks instead of
replaying old numbers from its run cache. It must stay cheap (no framework imports) and stable
(nothing that changes between two runs on the same machine).
"""

from __future__ import annotations

import os
import platform
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

# ISA features that decide which precisions can be fast on a CPU.
ISA_FLAGS = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "amx_int8",
    "amx_bf16",
)
PACKAGES = (
    "numpy",
    "torch",
    "onnx",
    "onnxscript",
    "onnxruntime",
    "onnxslim",
    "onnxconverter-common",
    "openvino",
    "nncf",
    "tensorflow-cpu",
    "keras",
    "tf2onnx",
    "jax",
    "jaxlib",
    "flax",
    "optax",
    "jax2onnx",
    "torchax",  # optional: recorded as absent when not installed
    "transformers",
    "scikit-learn",
    "dvc",
)


def _cpuinfo() -> dict[str, str]:
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    break  # first processor is enough
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError:
        pass
    return fields


@cache
def cpu_flags() -> frozenset[str]:
    return frozenset(_cpuinfo().get("flags", "").split())


def has_vnni() -> bool:
    """VNNI (AVX512-VNNI or AVX-VNNI) is what makes u8s8 INT8 matmuls fast without overflow."""
    return bool(cpu_flags() & {"avx512_vnni", "avx_vnni", "amx_int8"})


def has_native_fp16() -> bool:
    """FP16 arithmetic (not just conversion, which F16C gives) on this CPU."""
    return bool(cpu_flags() & {"avx512_fp16", "amx_fp16"})


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _memory_gib() -> float | None:
    try:
        with open("/proc/meminfo") as f:
            kib = int(f.readline().split()[1])
        return round(kib / 2**20, 1)
    except (OSError, ValueError, IndexError):
        return None


def gpus() -> list[str]:
    """NVIDIA GPUs the driver exposes (no CUDA import needed); empty on this project's CPU boxes."""
    models = []
    for info in sorted(Path("/proc/driver/nvidia/gpus").glob("*/information")):
        for line in info.read_text(errors="replace").splitlines():
            if line.startswith("Model:"):
                models.append(line.partition(":")[2].strip())
    return models


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def fingerprint() -> dict[str, Any]:
    info = _cpuinfo()
    flags = cpu_flags()
    return {
        "cpu": {
            "model": info.get("model name", platform.processor() or "unknown"),
            "vendor": info.get("vendor_id", "unknown"),
            "family": info.get("cpu family", ""),
            "model_id": info.get("model", ""),
            "arch": platform.machine(),
            "cores": cores(),
            "isa": {flag: flag in flags for flag in ISA_FLAGS},
            "vnni": has_vnni(),
            "native_fp16": has_native_fp16(),
        },
        "memory_gib": _memory_gib(),
        "gpus": ", ".join(gpus()) or "none",
        "os": platform.system(),
        "python": platform.python_version(),
        "packages": {name: _version(name) for name in PACKAGES},
    }


def write_env(params: Any, root: Path = Path(".")) -> dict[str, Any]:
    """The env stage: this fingerprint plus a probe of each configured target, to reports/env.json."""
    from pipeline.files import write_json
    from pipeline.layout import env_file
    from pipeline.target_probe import probe_all

    probes = probe_all(params.targets)
    write_json(env_file(root), fingerprint() | {"targets": probes})
    usable = [name for name, probe in probes.items() if probe["available"]]
    return {"status": "ok", "reason": f"targets usable here: {', '.join(usable) or 'none'}"}
