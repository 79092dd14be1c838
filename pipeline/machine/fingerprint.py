"""The environment fingerprint: what a benchmark number depends on besides the model.

Written by the always-run `env` stage (pipeline.machine.naming.write_env) in two files:
reports/software.json (library versions, no hardware), which the portable builds depend on, and
reports/env.json (all of it), which this machine's builds and every benchmark depend on. On another
CPU or with other library versions a file changes, so DVC reruns instead of replaying old numbers
from its run cache. It must stay cheap (no framework imports) and stable (nothing that changes
between two runs on the same machine).
"""

from __future__ import annotations

import os
import platform
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from pipeline.core import registry
from pipeline.core.records.env import Cpu, Env

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
# The packages whose versions decide what a build writes or a benchmark measures: the registry's
# table (pipeline.core.registry.PACKAGES), which every runtime, variant and source kind names its
# packages from, so a package a variant imports is recorded here and upgrading it reruns its stages.
PACKAGES = tuple(name for name, package in registry.PACKAGES.items() if package.extra is None)
# Only on GPU machines ([gpu] extra); recorded where figures are taken, so that upgrading them reruns the benchmarks.
GPU_PACKAGES = tuple(name for name, package in registry.PACKAGES.items() if package.extra == "gpu")


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
    return frozenset(_cpuinfo().get("flags", "").split())  # /proc/cpuinfo: a third-party file


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


# The same module from another distribution: a GPU machine's onnxruntime is onnxruntime-gpu.
ALTERNATIVES = {name: package.alternatives for name, package in registry.PACKAGES.items() if package.alternatives}


def _installed(package: str) -> str:
    """The exact version installed (with its build tag), from the distribution that provides the
    module: onnxruntime on a GPU machine is onnxruntime-gpu's, and says so."""
    for name in (package, *ALTERNATIVES.get(package, ())):
        version = _version(name)
        if version != "not installed":
            return version if name == package else f"{version} ({name})"
    return "not installed"


def _shared_version(package: str) -> str:
    """The version that decides what a build writes: the first installed distribution of the
    module, without the local build tag (torch 2.13.0+cpu and +cu130 export the same graphs)."""
    for name in (package, *ALTERNATIVES.get(package, ())):
        version = _version(name)
        if version != "not installed":
            return version.split("+")[0]
    return "not installed"


def software() -> dict[str, Any]:
    """What the shared builds depend on, and nothing of the hardware: equal on every machine
    installed the same way, so those builds are made once and pulled from the DVC remote."""
    return {
        "os": platform.system(),
        "arch": platform.machine(),
        "python": platform.python_version(),
        "packages": {name: _shared_version(name) for name in PACKAGES},
    }


def fingerprint() -> Env:
    """This machine's hardware and software (the env stage adds its name and target probes)."""
    info = {"model name": platform.processor() or "unknown", "vendor_id": "unknown", "cpu family": "", "model": ""}
    info |= _cpuinfo()  # /proc/cpuinfo's fields, where it has them
    flags = cpu_flags()
    return Env(
        cpu=Cpu(
            model=info["model name"],
            vendor=info["vendor_id"],
            family=info["cpu family"],
            model_id=info["model"],
            arch=platform.machine(),
            cores=cores(),
            isa={flag: flag in flags for flag in ISA_FLAGS},
            vnni=has_vnni(),
            native_fp16=has_native_fp16(),
        ),
        memory_gib=_memory_gib(),
        gpus=", ".join(gpus()) or "none",
        os=platform.system(),
        python=platform.python_version(),
        packages={name: _installed(name) for name in (*PACKAGES, *GPU_PACKAGES)},
    )
