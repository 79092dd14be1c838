"""GPU figures from NVML (nvidia-ml-py) over the batch-1 latency segment: energy per inference
from the device's total-energy counter, this process's GPU memory and the GPU's utilisation.

Same interface as pipeline.measure.energy.EnergyMeter (`start()`, `stop(calls)`), so the worker
swaps one for the other by target. NVML's energy counter and utilisation are per device: every
process on that GPU counts, as RAPL counts every process on a CPU package; the metrics say so.
"""

from __future__ import annotations

import os
import threading
from typing import Any

SAMPLE_S = 0.02


class GpuMeter:
    def __init__(self, target: str) -> None:
        import pynvml

        pynvml.nvmlInit()
        self._nvml = pynvml
        self.index = int(target.partition(":")[2] or 0)
        self._handle = pynvml.nvmlDeviceGetHandleByIndex(self.index)
        self._util: list[int] = []
        self._memory_mb = 0.0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._energy_mj = 0

    def process_memory_mb(self) -> float:
        """GPU memory held by this process (its CUDA context, weights, activations, workspaces)."""
        processes = self._nvml.nvmlDeviceGetComputeRunningProcesses(self._handle)
        return sum((p.usedGpuMemory or 0) for p in processes if p.pid == os.getpid()) / 1e6

    def _sample(self) -> None:
        while not self._done.wait(SAMPLE_S):
            self._util.append(self._nvml.nvmlDeviceGetUtilizationRates(self._handle).gpu)
            self._memory_mb = max(self._memory_mb, self.process_memory_mb())

    def start(self) -> None:
        self._memory_mb = self.process_memory_mb()
        self._energy_mj = self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle)  # mJ since driver load
        self._thread.start()

    def stop(self, calls: int) -> dict[str, Any]:
        joules = (self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle) - self._energy_mj) / 1000
        self._done.set()
        self._thread.join()
        return {
            "mj_per_inference": 1000 * joules / calls,
            "joules": joules,
            "calls": calls,
            "scope": f"NVML total energy of GPU {self.index}: every process on that GPU counts",
        }

    def figures(self) -> dict[str, Any]:
        """New keys beside the CPU schema: GPU memory of this process and GPU utilisation, sampled
        every 20 ms over the batch-1 latency segment."""
        mean = sum(self._util) / len(self._util) if self._util else None
        return {"gpu_memory_mb": self._memory_mb, "gpu_util_pct": mean}
