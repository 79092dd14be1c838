"""How many samples fit in one batch: measured on the model, not assumed.

A batch of 256 is nothing for a 200-feature classifier and tens of GB of activations for VGG19
in TensorFlow. The export stage measures the source model's resident-memory growth over one small
batch, and every later step (reference prediction, parity check, calibration, evaluation, the
throughput sweep) keeps its batches within `export.memory_budget_mb` of activations.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import psutil

from pipeline.errors import PipelineError

PROBE_BATCH = 4


def peak_rss_growth_mb(call: Callable[[], Any], interval_s: float = 0.0005) -> float:
    """Peak resident memory above the level before `call`, sampled by a thread while it runs."""
    process = psutil.Process()
    baseline = process.memory_info().rss
    peak = baseline
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
    peak = max(peak, process.memory_info().rss)
    return max(0.0, (peak - baseline) / 1e6)


def batch_limit(run_batch: Callable[[int], Any], budget_mb: float, fixed_batch: int | None) -> dict[str, Any]:
    """The largest batch whose activations fit `budget_mb`, from one measured probe batch.

    `run_batch(n)` runs the model on n samples. The first call (batch 1) pays one-time allocations
    (weights, arenas) and is not counted; the growth of a second call at a bigger batch is.
    """
    probe = fixed_batch or PROBE_BATCH
    run_batch(fixed_batch or 1)
    growth = peak_rss_growth_mb(lambda: run_batch(probe))
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
        "budget_mb": budget_mb,
        "how": "peak RSS growth of the source model over one probe batch, sampled every 0.5 ms",
    }


def batch_size(wanted: int, batching: dict[str, Any], fixed_batch: int | None) -> int:
    """`wanted`, capped to what fits; exactly the fixed batch for models that fix theirs."""
    return fixed_batch or max(1, min(wanted, int(batching.get("max_batch", wanted))))
