"""PyTorch: the source module in eager mode, or an AOTInductor package (torch_compile, and
torch_compile_cuda compiled for a GPU). On a GPU a timed call copies its inputs to the device and
its outputs back (the copy back waits for the kernels), as the ONNX Runtime and TensorRT GPU
paths do, so their latencies compare like for like."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pipeline.core.data import Arrays
from pipeline.core.records import code_entry
from pipeline.runtimes import base
from pipeline.runtimes.base import OpTime, Session, code_root
from pipeline.runtimes.torch_module import as_tuple, build_module

Config = base.Config  # no load settings of its own


class Details(base.Details):
    """What its sessions report (Session.details); None in a record written before the key was."""

    intra_op_threads: int | None = None
    mode: str | None = None  # eager module or AOTInductor package
    device: str | None = None  # the torch.device


def unavailable_on(target: str) -> str | None:
    if torch.version.cuda is None:
        return f"torch {torch.__version__} is a CPU-only build (this project pins the CPU wheel)"
    index = int(target.partition(":")[2] or 0)
    if index >= torch.cuda.device_count():
        return f"torch sees {torch.cuda.device_count()} CUDA device(s), {target} asked for"
    return None


def load_package(path: Path) -> Any:
    """An AOTInductor package, loaded without most of torch's vector-ISA probe. At load the probe only feeds
    a warning comparing the ISA the package was built for with this CPU's, and it builds and dlopens a test
    library per ISA, each in a child process: 1.1 s of every load on a 2-core Xeon, paid by each bench and
    contest process. inductor's `cpp.vec_isa_ok` takes the ISAs from the CPU's flags instead; the checks for
    AVX512-BF16, VNNI and AMX still build theirs (0.3 s)."""
    with torch._inductor.config.patch({"cpp.vec_isa_ok": True}):
        return torch._inductor.aoti_load_package(str(path))


class TorchSession(Session):
    def __init__(self, entry: Path, threads: int, config: Config, target: str = "cpu") -> None:
        self._device = torch.device(target)
        torch.set_num_threads(threads)
        torch.set_grad_enabled(False)  # once, instead of a context manager around every timed call
        spec = code_entry.load(entry)
        if spec.package:
            self._module = load_package(entry.parent / spec.package)
            self._mode = "AOTInductor package"
        else:
            weights = entry.parent / spec.weights if spec.weights else None
            self._module = build_module(
                spec.factory or "", spec.factory_args, weights, code_root(config), "torch artifact", spec.init_seed
            )
            self._module = self._module.to(self._device)
            self._mode = "eager, grad disabled"
        self.input_names, self.output_names = spec.inputs, spec.outputs
        self._threads = threads

    def _tensors(self, inputs: Arrays) -> list[torch.Tensor]:
        return [torch.from_numpy(np.ascontiguousarray(inputs[n])).to(self._device) for n in self.input_names]

    def run(self, inputs: Arrays) -> Arrays:
        with torch.inference_mode():
            outputs = as_tuple(self._module(*self._tensors(inputs)))
        return {n: t.cpu().numpy() for n, t in zip(self.output_names, outputs, strict=True)}

    def prepare(self, inputs: Arrays) -> Callable[[], Any]:
        module = self._module
        if self._device.type == "cuda":  # host tensors in, host tensors out: what ORT's session.run pays
            host, device = [torch.from_numpy(np.ascontiguousarray(inputs[n])) for n in self.input_names], self._device
            return lambda: [t.cpu() for t in as_tuple(module(*(h.to(device) for h in host)))]  # .cpu() waits
        tensors = self._tensors(inputs)
        return lambda: module(*tensors)

    def op_times(self, inputs: Arrays, calls: int) -> list[OpTime]:
        """The autograd profiler's CPU activity: self time per aten operator (children not counted twice).
        Not torch.profiler.profile, the same profiler wrapped: its start asks `hasattr(torch, "_inductor")`,
        which imports inductor (0.7 s of an eager bench)."""
        call = self.prepare(inputs)
        with torch.autograd.profiler.profile() as profiler:
            for _ in range(calls):
                call()
        return [
            OpTime(event.key, event.self_cpu_time_total / 1000 / event.count)
            for event in profiler.key_averages()
            for _ in range(event.count)
            if event.self_cpu_time_total > 0
        ]

    def details(self) -> dict[str, Any]:
        return Details.model_validate(
            {"intra_op_threads": self._threads, "mode": self._mode, "device": str(self._device)}
        ).as_dict()


def load(artifact: Path, threads: int, config: Config, target: str = "cpu") -> TorchSession:
    return TorchSession(artifact, threads, config, target)
