"""This machine's roofs, measured by the env stage: the dense multiply-accumulate rate of each precision
through ONNX Runtime's and OpenVINO's own kernels, read bandwidth at cache- and memory-sized working
sets, and the time of a zero-work call in each runtime (reports/peaks.json).

A roof is what this CPU does with the kernels the variants run on, on the configured threads, not a
datasheet figure: a 2-vCPU VM may be one core's two threads, and a turbo clock is not a sustained one.
The vendor arithmetic (cores x clock x MACs per cycle of the ISA) is written beside it, never used.

Measured once per machine class, threads and runtime versions (the key): a peaks.json with this key
is kept as it is, else one from the user cache is copied, else it is measured (about 12 s, holding
the machine lock as a benchmark does) and cached when other processes took less than 25% of a core
meanwhile (MODELOPT_PEAKS_QUIET_PCT; the cache folder: MODELOPT_PEAKS_CACHE).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.core import layout
from pipeline.core.records import env as records_env
from pipeline.core.records.env import Env
from pipeline.core.records.roofline import Peaks, Rate, load_peaks, write_peaks

GEMM = (256, 1024, 1024)  # M, K, N: 268 M MACs, weights 1-4 MB: compute-bound on any CPU here
WORKING_SETS_MB = (1, 16, 256)  # about a core's L2, a shared L3, and memory
BLOCKS, BLOCK_S = 15, 0.06  # about 1 s a figure: long enough to span the speed states these VMs flip between
CACHE_ENV = "MODELOPT_PEAKS_CACHE"
QUIET_ENV = "MODELOPT_PEAKS_QUIET_PCT"  # other processes' CPU above this (default 25% of a core): not cached


def cache_dir() -> Path:
    if folder := os.environ.get(CACHE_ENV):
        return Path(folder)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "modelopt-pipeline" / "peaks"


def peaks_key(machine: str, threads: int) -> str:
    versions = [f"{name}-{_version(name)}" for name in ("onnxruntime", "openvino", "numpy")]
    return "_".join([machine, f"{threads}t", *versions])


def ensure_peaks(threads: int, root: Path = Path(".")) -> tuple[Peaks, str]:
    """The roofs for this machine at `threads`, and where they came from (kept, cached or measured)."""
    env = records_env.load(root) or Env()
    machine = env.machine.hardware if env.machine else "unknown"
    key = peaks_key(machine, threads)
    kept = load_peaks(root)
    if kept and kept.key == key:
        return kept, "kept (measured earlier on this machine class)"
    cached = cache_dir() / f"{key}.json"
    if cached.is_file():
        shutil.copyfile(cached, layout.peaks_file(root))
        return load_peaks(root), f"from the cache {cached}"  # type: ignore[return-value]
    from pipeline.machine.lock import machine_lock

    with machine_lock(exclusive=True):
        peaks = measure_peaks(key, machine, threads, env)
    write_peaks(peaks, root)
    if (peaks.other_cpu_pct or 0.0) < float(os.environ.get(QUIET_ENV, "25")):
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(f".{os.getpid()}.tmp")
        shutil.copyfile(layout.peaks_file(root), tmp)
        tmp.replace(cached)
        return peaks, "measured (and cached)"
    return peaks, f"measured beside other work ({peaks.other_cpu_pct:.0f}% of a core): not cached"


def measure_peaks(key: str, machine: str, threads: int, env: Env) -> Peaks:
    from pipeline.measure.clock import CpuClock  # imported here: the env stage runs on every `dvc repro`

    clock = CpuClock()
    macs: dict[str, dict[str, Rate]] = {}
    not_measured: dict[str, str] = {}
    overhead: dict[str, Rate] = {}
    with tempfile.TemporaryDirectory() as folder, clock.running():
        graphs = {name: _save(build(), Path(folder) / f"{name}.onnx") for name, build in GRAPHS.items()}
        kernels: dict[tuple[str, str], tuple[Callable[[], Any], str]] = {}
        for precision, op in (("fp32", "MatMul"), ("int8", "QLinearMatMul u8 x s8")):
            kernels[precision, "onnxruntime"] = (_ort_call(graphs[precision], threads), f"onnxruntime {op}")
        for precision, hint in {"fp32": "f32", "int8": "f32", "bf16": "bf16", "fp16": "f16"}.items():
            if why := _no_native(precision, env):
                not_measured[precision] = why
                continue
            graph = graphs["int8" if precision == "int8" else "fp32"]
            op = "QLinearMatMul (i8 kernels)" if precision == "int8" else f"MatMul, INFERENCE_PRECISION_HINT {hint}"
            kernels[precision, "openvino"] = (_ov_call(graph, threads, hint), f"openvino {op}")
        for (precision, runtime), (call, how) in kernels.items():  # one at a time: see _block_seconds
            macs.setdefault(precision, {})[runtime] = _rate(_block_seconds(call), how)
        overhead["onnxruntime"] = _time_ms(_ort_call(graphs["identity"], threads), "onnxruntime Identity of 1 value")
        overhead["openvino"] = _time_ms(_ov_call(graphs["identity"], threads, "f32"), "openvino Identity of 1 value")
        read = {str(mb): _bandwidth(mb, threads, copy=False) for mb in WORKING_SETS_MB}
        copy = _bandwidth(WORKING_SETS_MB[-1], threads, copy=True)
    nominal, how = nominal_gmacs(env, threads)
    load = clock.other_load()
    return Peaks(
        key=key,
        machine=machine,
        threads=threads,
        macs_gmacs=macs,
        not_measured=not_measured,
        read_gbs=read,
        copy_gbs=copy,
        overhead_ms=overhead,
        nominal_gmacs=nominal,
        nominal_how=how,
        other_cpu_pct=round(load["other_cpu_pct"], 1),
        steal_pct=round(load["steal_pct"], 1),
    )


def _no_native(precision: str, env: Env) -> str:
    isa = env.cpu.isa
    if precision == "bf16" and not (isa.get("avx512_bf16") or isa.get("amx_bf16")):
        return "no native BF16 here (neither AVX512_BF16 nor AMX-BF16): OpenVINO computes such a model in FP32"
    if precision == "fp16" and not (env.cpu.native_fp16 or isa.get("avx512_fp16")):
        return "no native FP16 arithmetic here (no AVX512-FP16 / AMX-FP16): FP16 weights are computed in FP32"
    return ""


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "none"


# -- the graphs -------------------------------------------------------------------------------------


def _fp32_gemm() -> Any:
    from onnx import TensorProto, helper, numpy_helper

    m, k, n = GEMM
    weights = np.random.default_rng(0).standard_normal((k, n)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "fp32_gemm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])],
        [numpy_helper.from_array(weights, "w")],
    )
    return graph


def _int8_gemm() -> Any:
    """u8 activations x s8 weights (QLinearMatMul): ORT's VNNI kernel, OpenVINO's i8 MatMul."""
    from onnx import TensorProto, helper, numpy_helper

    m, k, n = GEMM
    weights = np.random.default_rng(0).integers(-127, 127, (k, n), dtype=np.int8)
    scalars = {"xs": np.float32(0.02), "xz": np.uint8(128), "ws": np.float32(0.01), "wz": np.int8(0)}
    scalars |= {"ys": np.float32(0.5), "yz": np.uint8(128)}
    inputs = ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"]
    graph = helper.make_graph(
        [helper.make_node("QLinearMatMul", inputs, ["y"])],
        "int8_gemm",
        [helper.make_tensor_value_info("x", TensorProto.UINT8, [m, k])],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, [m, n])],
        [numpy_helper.from_array(weights, "w")] + [numpy_helper.from_array(np.array(v), k) for k, v in scalars.items()],
    )
    return graph


def _identity() -> Any:
    from onnx import TensorProto, helper

    value = lambda name: helper.make_tensor_value_info(name, TensorProto.FLOAT, [1])  # noqa: E731
    return helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "identity", [value("x")], [value("y")])


GRAPHS: dict[str, Callable[[], Any]] = {"fp32": _fp32_gemm, "int8": _int8_gemm, "identity": _identity}


def _save(graph: Any, path: Path) -> Path:
    import onnx
    from onnx import helper

    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(model, str(path))
    return path


def _feed(path: Path) -> np.ndarray:
    name = path.stem
    if name == "int8":
        return np.random.default_rng(1).integers(0, 255, GEMM[:2], dtype=np.uint8)
    shape = (1,) if name == "identity" else GEMM[:2]
    return np.random.default_rng(1).standard_normal(shape).astype(np.float32)


def _ort_call(path: Path, threads: int) -> Callable[[], Any]:
    """The call a bench times (pipeline.runtimes.ort: the bench's session options, inputs bound)."""
    from pipeline.runtimes.ort import OrtSession

    return OrtSession(path, threads).prepare({"x": _feed(path)})


def _ov_call(path: Path, threads: int, hint: str) -> Callable[[], Any]:
    """The call a bench times (pipeline.runtimes.ov: LATENCY hint, the threads, a request with its inputs bound)."""
    from pipeline.runtimes.ov import Config, OpenVinoSession

    session = OpenVinoSession(path, threads, Config(inference_precision=hint))
    call = session.prepare({"x": _feed(path)})
    return lambda _alive=session: call()  # the session keeps the request's compiled model


# -- the timing -------------------------------------------------------------------------------------


def _calls_per_block(call: Callable[[], Any]) -> int:
    """Calls in a block of about BLOCK_S, after two warm calls."""
    call(), call()
    start = time.perf_counter()
    call()
    return max(1, round(BLOCK_S / max(time.perf_counter() - start, 1e-7)))


def _block_seconds(call: Callable[[], Any], blocks: int = BLOCKS) -> list[float]:
    """Seconds per call in each of `blocks` blocks, after a warm block (thread pools spin up, pages fault
    in). Each kernel is timed alone: a runtime's threads spin for a while after a call, and timed in turns
    with another runtime's on 2 cores they took its cores (OpenVINO's FP32 MatMul read 30 GMAC/s beside
    ONNX Runtime's, 59-88 alone)."""
    size = _calls_per_block(call)
    seconds = []
    for _ in range(blocks + 1):
        start = time.perf_counter()
        for _ in range(size):
            call()
        seconds.append((time.perf_counter() - start) / size)
    return seconds[1:]


def _rate(seconds: list[float], how: str) -> Rate:
    """GMAC/s of the GEMM from its seconds per call: the pooled rate with the interval of the blocks' median."""
    giga = GEMM[0] * GEMM[1] * GEMM[2] / 1e9
    shape = f"{GEMM[0]}x{GEMM[1]}x{GEMM[2]}"
    rates = [giga / s for s in seconds]
    return _as_rate(
        rates, giga / float(np.mean(seconds)), f"{how}, {shape}, {len(seconds)} blocks of ~{BLOCK_S * 1e3:.0f} ms"
    )


def _time_ms(call: Callable[[], Any], how: str) -> Rate:
    seconds = _block_seconds(call)
    milliseconds = [s * 1e3 for s in seconds]
    return _as_rate(
        milliseconds,
        float(np.median(milliseconds)),
        f"{how}, median call of {BLOCKS} blocks of ~{BLOCK_S * 1e3:.0f} ms",
    )


def _as_rate(values: list[float], center: float, how: str) -> Rate:
    """`center` with the 95% interval of the median of the blocks' `values`."""
    from pipeline.core.stats import median_interval  # scipy: only when measuring

    interval = median_interval(values, center)
    return Rate(
        center=round(interval.center, 4),
        low=round(interval.low, 4),
        high=round(interval.high, 4),
        blocks=interval.blocks,
        how=how,
    )


def _bandwidth(size_mb: int, threads: int, copy: bool) -> Rate:
    """GB/s reading (a vectorised max of uint8) or copying `size_mb` MB split over `threads` threads."""
    from concurrent.futures import ThreadPoolExecutor

    source = np.ones(size_mb * 2**20, dtype=np.uint8)
    target = np.empty_like(source) if copy else None
    slices = [slice(i * source.size // threads, (i + 1) * source.size // threads) for i in range(threads)]
    moved = source.nbytes * (2 if copy else 1)
    repeats = max(1, round(BLOCK_S * 20e9 / moved))  # about a block at 20 GB/s

    def work(part: slice) -> None:
        for _ in range(repeats):
            if target is not None:
                np.copyto(target[part], source[part])
            else:
                source[part].max()

    with ThreadPoolExecutor(threads) as pool:
        seconds = _block_seconds(lambda: list(pool.map(work, slices)))
    rates = [moved * repeats / s / 1e9 for s in seconds]
    what = "copy (read + write counted)" if copy else "read (numpy max of uint8)"
    pooled = moved * repeats / float(np.mean(seconds)) / 1e9
    return _as_rate(rates, pooled, f"{what} of {size_mb} MB on {threads} threads, {BLOCKS} blocks")


# -- the vendor arithmetic --------------------------------------------------------------------------


def nominal_gmacs(env: Env, threads: int) -> tuple[dict[str, float], str]:
    """cores x max clock x MACs per cycle per core of the ISA, from the FMA width the vendor documents:
    2 x 512-bit on Intel with AVX-512 (1 port on some SKUs), 2 x 256-bit on AMD before Zen 5 (Zen 4
    splits 512-bit operations), 2 x 512-bit on Zen 5; VNNI 4 and BF16 dot products 2 per FP32 lane;
    AMX 1024 INT8 and 512 BF16 MACs per cycle. Empty where the clock is unknown."""
    mhz = _max_mhz()
    isa, cpu = env.cpu.isa, env.cpu
    if not mhz or not (isa.get("fma") or isa.get("avx512f")):
        return {}, "no vendor figure: clock or FMA unit unknown"
    wide = isa.get("avx512f") and (
        cpu.vendor == "GenuineIntel" or ((cpu.family or "0").isdigit() and int(cpu.family) >= 26)
    )
    fp32 = 32 if wide else 16
    per_cycle = {"fp32": fp32}
    if isa.get("avx512_vnni") or isa.get("avx_vnni"):
        per_cycle["int8"] = 4 * fp32
    if isa.get("avx512_bf16"):
        per_cycle["bf16"] = 2 * fp32
    if isa.get("amx_int8"):
        per_cycle["int8"] = 1024
    if isa.get("amx_bf16"):
        per_cycle["bf16"] = 512
    ghz = mhz / 1e3
    how = (
        f"{threads} cores x {ghz:.2f} GHz (the highest clock the OS reports) x MACs per cycle per core "
        f"({', '.join(f'{k} {v}' for k, v in per_cycle.items())}); a vCPU may be half a core"
    )
    return {k: round(threads * ghz * v, 1) for k, v in per_cycle.items()}, how


def _max_mhz() -> float | None:
    path = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
    if path.is_file():
        return int(path.read_text()) / 1e3
    try:
        speeds = [float(line.split(":")[1]) for line in Path("/proc/cpuinfo").read_text().splitlines() if "MHz" in line]
    except (OSError, ValueError, IndexError):
        return None
    return max(speeds) if speeds else None
