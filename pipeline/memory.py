"""How many samples fit in one batch: measured on the model, not assumed.

A batch of 256 is nothing for a 200-feature classifier and 13 GB of activations for VGG19 in
TensorFlow (measured: about 50 MB a sample at 224x224). The export stage measures the source
model's resident-memory growth over a probe batch, and every later step (reference prediction,
parity check, calibration, evaluation, the throughput sweep) keeps its batches within
`export.memory_budget_mb` of activations.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import psutil

from pipeline.errors import PipelineError


def peak_rss_mb(call: Callable[[], Any], interval_s: float = 0.0005) -> float:
    """Peak resident memory of this process while `call` runs, sampled by a thread (MB)."""
    process = psutil.Process()
    peak = process.memory_info().rss
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, process.memory_info().rss)
            time.sleep(interval_s)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        call()
    finally:
        done.set()
        sampler.join()
    return max(peak, process.memory_info().rss) / 1e6


def peak_rss_growth_mb(call: Callable[[], Any]) -> float:
    """Peak resident memory above the level before `call`."""
    baseline = psutil.Process().memory_info().rss / 1e6
    return max(0.0, peak_rss_mb(call) - baseline)


def batch_limit(
    run_batch: Callable[[int], Any], budget_mb: float, fixed_batch: int | None, largest: int = 256
) -> dict[str, Any]:
    """The largest batch whose activations fit `budget_mb`, measured on the model.

    `run_batch(n)` runs the model on n samples. After one warm call (batch 1: weights, arenas),
    batches double until the process has grown by half the budget (or reach `largest`):
    allocators reuse freed memory, so a small probe batch shows too little growth to scale from.
    """
    baseline = psutil.Process().memory_info().rss / 1e6
    run_batch(fixed_batch or 1)
    warm = psutil.Process().memory_info().rss / 1e6
    probe = fixed_batch or 2
    while True:
        growth = max(0.0, peak_rss_mb(lambda n=probe: run_batch(n)) - warm)
        if fixed_batch or growth >= budget_mb / 2 or probe >= largest:
            break
        probe *= 2
    per_sample = max(growth / probe, 0.01)
    available = psutil.virtual_memory().available / 1e6
    if per_sample * (fixed_batch or 1) > min(budget_mb, available):
        raise PipelineError(
            f"one batch of {fixed_batch or 1} needs about {per_sample * (fixed_batch or 1):,.0f} MB of activations: "
            f"more than export.memory_budget_mb ({budget_mb:,.0f}) or the {available:,.0f} MB available"
        )
    return {
        "max_batch": fixed_batch or max(1, int(budget_mb // per_sample)),
        "per_sample_mb": per_sample,
        "probe_batch": probe,
        "warm_up_mb": warm - baseline,
        "budget_mb": budget_mb,
        "how": "peak RSS of the source model over a doubling probe batch above its warm level, sampled every 0.5 ms",
    }


def batch_size(wanted: int, batching: dict[str, Any], fixed_batch: int | None) -> int:
    """`wanted`, capped to what fits; exactly the fixed batch for models that fix theirs."""
    return fixed_batch or max(1, min(wanted, int(batching.get("max_batch", wanted))))
