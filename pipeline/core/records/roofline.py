"""How far each variant is from this machine's limit: the machine's measured peaks (reports/peaks.json,
the env stage's, pipeline.measure.peaks) and each variant's distance from its roofline bound
(reports/roofline/<model>.json, the select stage's, pipeline.decide.roofline: a DVC metrics file).

Peaks live beside env.json, not in it: every benchmark depends on env.json, and a re-measured peak
must rerun the report, never the benchmarks.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from pipeline.core import layout
from pipeline.core.files import read_json, write_json
from pipeline.core.records.base import Part

PRECISIONS = ("fp32", "bf16", "fp16", "int8")  # the roofs, by the precision a variant's products execute in


class Rate(Part):
    """A measured rate: the pooled figure and the 95% interval of the median of its timed blocks."""

    center: float
    low: float
    high: float
    blocks: int
    how: str = ""


class Peaks(Part):
    """This machine's roofs, measured on `threads` threads with the runtimes' own kernels."""

    key: str = Field(description="machine class, threads and runtime versions: a peak is reused only under its key")
    machine: str
    threads: int
    macs_gmacs: dict[str, dict[str, Rate]] = Field(
        default_factory=dict, description="precision -> runtime -> dense GMAC/s (a large MatMul)"
    )
    not_measured: dict[str, str] = Field(default_factory=dict, description="precision -> why it has no roof here")
    read_gbs: dict[str, Rate] = Field(
        default_factory=dict, description="working set in MB -> read bandwidth, GB/s (the memory roofs)"
    )
    copy_gbs: Rate | None = Field(None, description="stream-like copy of the largest working set, GB/s")
    overhead_ms: dict[str, Rate] = Field(default_factory=dict, description="runtime -> a zero-work call, ms")
    nominal_gmacs: dict[str, float] = Field(
        default_factory=dict, description="precision -> vendor arithmetic (shown beside, never used as a roof)"
    )
    nominal_how: str = ""
    other_cpu_pct: float | None = Field(None, description="other processes' CPU while measuring, % of one core")
    steal_pct: float | None = Field(None, description="the hypervisor's steal while measuring, % of one core")

    def roof(self, precision: str) -> tuple[float, str] | None:
        """The highest measured rate for `precision` and the runtime that reached it (None: none here)."""
        rates = self.macs_gmacs.get(precision, {})
        if not rates:
            return None
        runtime = max(rates, key=lambda name: rates[name].center)
        return rates[runtime].center, runtime

    def bandwidth(self, working_set_bytes: float) -> tuple[float, str] | None:
        """Read bandwidth for a working set: the smallest measured one that holds it (the largest else)."""
        if not self.read_gbs:
            return None
        sizes = sorted(self.read_gbs, key=float)
        size = next((s for s in sizes if float(s) * 2**20 >= working_set_bytes), sizes[-1])
        return self.read_gbs[size].center, size


class Distance(Part):
    """One variant against its roofline: what it did, what bounds it, and how close it came.

    A call cannot take less than the largest of three times: its MACs at the roof of its executed
    precision (compute), its bytes at the read bandwidth of its working set (memory), and a zero-work
    call in its runtime (overhead); `bound_by` names the largest, and `of_bound` is that time over the
    call's measured time. Where compute or memory bounds it, that is the achieved MAC/s over the
    roofline's min(roof, intensity x bandwidth) (`roof_gmacs`); where overhead does, the share of what
    any artifact in that runtime could reach."""

    status: str = Field(
        "ok",
        description="ok; `not counted` (a decoder, a graph that cannot be sized); `counting error` (the measured "
        "call beat its own bound: the count is wrong, the share is not given); else the variant's status",
    )
    reason: str = Field("", description="why it is not counted")
    roof_precision: str | None = Field(None, description="the roof it is held against: fp32, bf16, fp16 or int8")
    macs: int | None = Field(None, description="multiply-accumulates per sample at the measured dims (source graph)")
    weight_mb: float | None = Field(None, description="the artifact's size: its weights at their storage precision")
    activation_mb: float | None = Field(None, description="per sample, each written tensor once at the float width")
    intensity: float | None = Field(None, description="MACs per byte moved at batch 1")
    achieved_gmacs: float | None = Field(None, description="MACs per call over the p50, GMAC/s (batch 1)")
    roof_gmacs: float | None = Field(None, description="the roofline's min(roof, intensity x bandwidth), batch 1")
    of_bound: float | None = Field(None, description="the bound's time over the measured time, batch 1")
    bound_by: str | None = Field(None, description="compute, memory or overhead: the largest floor at batch 1")
    peak_batch: int | None = Field(None, description="the peak-throughput batch of the sweep")
    intensity_peak: float | None = Field(None, description="MACs per byte moved at the peak-throughput batch")
    achieved_gmacs_peak: float | None = Field(None, description="at the peak-throughput batch")
    roof_gmacs_peak: float | None = Field(None, description="the roofline's bound at the peak-throughput batch")
    of_bound_peak: float | None = Field(None, description="the bound's time over the measured, peak batch")
    bound_by_peak: str | None = Field(None, description="what bounds it at the peak-throughput batch")
    why: str = Field("", description="the sentence the manifest and the report quote")


def write_peaks(peaks: Peaks, root: Path = Path(".")) -> None:
    write_json(layout.peaks_file(root), peaks.model_dump(mode="json", exclude_none=True))


def load_peaks(root: Path = Path(".")) -> Peaks | None:
    path = layout.peaks_file(root)
    return Peaks.model_validate(read_json(path)) if path.exists() else None


METRIC_FIELDS = {"of_bound", "of_bound_peak", "bound_by"}  # what `dvc metrics diff` shows: three columns


def write_distances(model: str, distances: dict[str, Distance], root: Path = Path(".")) -> None:
    """reports/roofline/<model>.json (variant -> distance, in full) and reports/distance/<model>/<variant>.json
    (its METRIC_FIELDS, one file per variant as reports/metrics has: `dvc metrics show` stays one narrow table)."""
    full = {k: v.model_dump(mode="json", exclude_none=True) for k, v in distances.items()}
    write_json(layout.roofline_file(model, root), full)
    folder = layout.distance_dir(model, root)
    folder.mkdir(parents=True, exist_ok=True)  # a DVC output, even for a model with no record
    for stale in folder.glob("*.json"):
        stale.unlink()
    for variant, distance in distances.items():
        figures = distance.model_dump(include=METRIC_FIELDS, exclude_none=True)
        write_json(folder / f"{variant}.json", figures or {"status": distance.status})


def load_distances(model: str, root: Path = Path(".")) -> dict[str, Distance]:
    path = layout.roofline_file(model, root)
    return {k: Distance.model_validate(v) for k, v in read_json(path).items()} if path.exists() else {}
