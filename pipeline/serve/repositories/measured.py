"""The serving settings a manifest's measurements support, each with the sentence that names the
measurement: the writers put the sentence beside the setting, the checks recompute the setting."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TypeVar

from pipeline.core.records.manifest import Manifest
from pipeline.core.records.measured import RuntimeSettings, SampleRateInterval
from pipeline.core.records.variant import VariantRecord
from pipeline.runtimes import ov
from pipeline.serve.signature import Signature

Settings = TypeVar("Settings", bound=RuntimeSettings)
MEMORY_HEADROOM = 2.0  # x the bench process's peak RSS: a server's own baseline differs from a Python process's


def num(value: float) -> str:
    """A figure as the comments print it: whole numbers from 100 up, else 4 significant digits."""
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.4g}"


def metrics(manifest: Manifest) -> VariantRecord:
    if manifest.metrics is None:  # scope.why_not refuses such a manifest first
        raise ValueError(f"{manifest.model}: the manifest holds no measurements")
    return manifest.metrics


def runtime_settings(manifest: Manifest, details: type[Settings]) -> Settings:
    """The runtime's own settings the figures were measured with, as its adapter types them (`details`, the
    runtime module's Details; none recorded: every one unset)."""
    recorded = metrics(manifest).runtime_settings
    return details.model_validate(recorded.as_dict() if recorded else {})


def by_batch(manifest: Manifest) -> dict[int, float]:
    """Samples/s of one synchronous caller at each batch of the sweep, by batch size."""
    sweep = metrics(manifest).throughput_sps
    return {int(key[1:]): sps for key, sps in sweep.by_batch.items()} if sweep else {}


def largest_batch(manifest: Manifest) -> int | None:
    sweep = by_batch(manifest)
    return max(sweep) if sweep else None


def sweep_text(manifest: Manifest) -> str:
    """'b1 60421, b128 1701730 samples/s': the sweep's first and last batch."""
    sweep = by_batch(manifest)
    if not sweep:
        return "no throughput sweep recorded"
    ends = sorted({min(sweep), max(sweep)})
    return ", ".join(f"b{b} {num(sweep[b])}" for b in ends) + " samples/s"


def batch_axis_problem(manifest: Manifest, signature: Signature) -> str | None:
    """Why a server cannot stack requests along the first axis of every tensor (None: it can)."""
    if manifest.fixed_batch is not None:
        return f"the model fixes its batch to {manifest.fixed_batch} (manifest fixed_batch)"
    for name, spec in manifest.inputs.items():
        if not spec.shape:
            return f"input {name} is a scalar (no batch axis)"
        if spec.batch_axis != 0:
            return f"input {name}'s batch axis is {spec.batch_axis} (manifest inputs.{name}.batch_axis), not the first"
    layout = manifest.runtime_config.layout
    for name, axis in (layout.outputs if layout else {}).items():
        if axis != 0:
            return f"output {name}'s rows are on axis {axis} (manifest runtime_config.layout.outputs), not the first"
    for tensor in (*signature.inputs, *signature.outputs):
        if not tensor.shape or tensor.shape[0] != -1:
            return f"{tensor.name}'s first dimension is {tensor.shape[:1] or 'absent'} in {manifest.entry}, not dynamic"
    return None


def _interval(interval: SampleRateInterval | None) -> str:
    if interval is None or interval.low is None or interval.high is None:
        return "no interval"
    return f"{num(interval.low)}-{num(interval.high)}"


def batching_pays(manifest: Manifest) -> tuple[bool, str]:
    """Whether stacking requests pays: some batch above 1 measured clearly more samples/s than batch 1,
    beyond both 95% intervals, and the peak is above batch 1. And the figures that say so."""
    record, sweep = metrics(manifest), by_batch(manifest)
    one = record.throughput_interval(1)
    clear = [
        b
        for b in sorted(sweep)
        if b > 1
        and one is not None
        and one.high is not None
        and (ci := record.throughput_interval(b)) is not None
        and ci.low is not None
        and ci.low > one.high
    ]
    figures = ", ".join(f"b{b} {_interval(record.throughput_interval(b))}" for b in sorted(sweep))
    peak = record.throughput_sps.peak_batch if record.throughput_sps else None
    if not clear or peak is None or peak <= 1:
        return False, f"no batch above 1 measured clearly more samples/s than batch 1 (95% intervals: {figures})"
    return True, f"b{clear[-1]} beats b1 beyond both 95% intervals ({figures}); b{peak} is the peak"


def queue_delay_us(manifest: Manifest) -> int:
    """The batch-1 p50, µs: waiting longer for a batch than one call takes costs more than it gains."""
    return max(1, round(metrics(manifest).p50_ms * 1000))


@dataclass(frozen=True)
class Concurrency:
    """How the concurrent measurement ran requests: what instance counts and thread settings follow."""

    requests: int
    total_threads: int
    sps: float | None
    batch: int
    streams: int | None  # OpenVINO's THROUGHPUT hint
    threads: int | None  # OpenVINO: the compiled model's INFERENCE_NUM_THREADS
    how: str

    @property
    def threads_per_request(self) -> int:
        """ONNX Runtime's share: one session (intra-op pool) per request (pipeline.runtimes.ort)."""
        return max(1, self.total_threads // self.requests)

    @property
    def text(self) -> str:
        measured = f"{num(self.sps)} samples/s" if self.sps is not None else "not measured"
        return f"{self.requests} requests in flight at batch {self.batch} on {self.total_threads} threads: {measured}"


def concurrency(manifest: Manifest) -> Concurrency:
    record = metrics(manifest)
    found = record.throughput_concurrent
    if found is None:
        return Concurrency(1, record.threads or 1, None, 1, None, None, "no concurrent measurement recorded")
    return Concurrency(
        found.requests, found.total_threads, found.sps, found.batch, found.streams, found.threads, found.how
    )


@dataclass(frozen=True)
class PluginSettings:
    """The OpenVINO CPU plugin settings the measured runs used: what Triton's openvino_backend and
    OVMS are each given as far as their keys reach."""

    threads: int  # the concurrent measurement's compiled model
    streams: int | None  # the THROUGHPUT hint's streams (None: not measured with the hint)
    precision: str | None  # the precision the measured run computed in (None: the plugin's choice)
    group_size: int | None  # dynamic quantization's group size


def openvino_plugin(manifest: Manifest) -> PluginSettings:
    found = concurrency(manifest)
    ran, built = runtime_settings(manifest, ov.Details), ov.Config.model_validate(manifest.runtime_config.as_dict())
    precision = ran.inference_precision or built.inference_precision
    recorded = ran.dynamic_quantization_group_size
    group = built.dynamic_quantization_group_size if recorded is None else recorded
    return PluginSettings(
        threads=found.threads or found.total_threads,
        streams=found.streams,
        precision=str(precision) if precision and precision != "auto" else None,
        group_size=group,
    )


def peak_rss_mb(manifest: Manifest) -> tuple[float, str]:
    """The bench process's peak RSS at the largest batch measured, MB, and where it was measured."""
    record = metrics(manifest)
    by_rss = {int(k[1:]): v for k, v in (record.rss_mb_by_batch or {}).items()}
    batch = max(by_rss) if by_rss else 1
    peak = by_rss[batch] if by_rss else record.peak_rss_mb or 0.0
    return peak, f"peak RSS {num(peak)} MB at batch {batch} on {manifest.machine}"


def memory_mb(manifest: Manifest) -> tuple[int, str]:
    """The memory to ask for, MB: that peak x MEMORY_HEADROOM."""
    peak, where = peak_rss_mb(manifest)
    return math.ceil(
        peak * MEMORY_HEADROOM
    ), f"{where} x {MEMORY_HEADROOM:g} headroom (a server's own baseline differs)"
