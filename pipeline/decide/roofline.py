"""How far each variant of a model is from this machine's limit (reports/roofline/<model>.json).

A variant's work is its source graph's (pipeline.core.work, at the dims it was measured at): quantizing
or fusing changes how the products are computed, not how many there are. Its bytes are its artifact's
size (the weights at their storage precision) plus each activation written once, at the float width it
executes in (INT8 activations counted at their float width: an upper bound on their traffic). Its
roof is the measured rate of the precision its products execute in (a BF16-executed INT8 model's
products are INT8; OpenVINO's FP32 on a BF16 CPU runs BF16), or intensity x the read bandwidth at its
working set when that is lower (pipeline.core.records.roofline.Distance says how each is read). A share
over 100% is a counting error, recorded as such (status `counting error`) and never printed as a share.
"""

from __future__ import annotations

from pathlib import Path

from pipeline.core import layout
from pipeline.core.records import Records, VariantRecord
from pipeline.core.records import source as source_record
from pipeline.core.records.roofline import Distance, Peaks, load_peaks, write_distances
from pipeline.core.records.source import SourceRecord
from pipeline.core.work import Work, count_work


def roof_precision(executed: str) -> str:
    """The roof a variant is held against, from the precision it executed in (e.g. `int8+bf16`)."""
    parts = executed.split("+")
    for precision in ("int8", "int4", "bf16", "fp16"):
        if precision in parts:
            return "int8" if precision == "int4" else precision
    return "fp32"


def write_roofline(model: str, records: Records, root: Path = Path(".")) -> dict[str, Distance]:
    """Every measured variant of `model` against its bound, written as the model's roofline metrics."""
    peaks = load_peaks(root)
    source = (
        source_record.load(model, root) if (layout.source_dir(model, root) / layout.SOURCE_INFO).is_file() else None
    )
    work, why_not = _source_work(model, source, root)
    distances: dict[str, Distance] = {}
    for variant, record in records.items():
        if record.status != "ok" or record.latency_ms is None:
            distances[variant] = Distance(status=record.status, reason="not measured")
        elif peaks is None:
            distances[variant] = Distance(status="not counted", reason="no reports/peaks.json: run the env stage")
        elif work is None:
            distances[variant] = Distance(status="not counted", reason=why_not)
        else:
            distances[variant] = distance(record, work, source.fixed_batch if source else None, peaks)
    write_distances(model, distances, root)
    return distances


def _source_work(model: str, source: SourceRecord | None, root: Path) -> tuple[Work | None, str]:
    """The source graph's work per sample at the measured dims, or why there is none."""
    if source is None or not source.ok:
        return None, "the source did not export"
    if source.family.model_type == "decoder" or source.task == "text-generation":
        return None, "a decoder: its work per token grows with the cache, no single count"
    path = layout.source_dir(model, root) / layout.EXPORTED_ONNX
    if not path.is_file():
        return None, "no ONNX source graph to count"
    import onnx

    batch = source.fixed_batch or 1
    shapes = {name: spec.model_shape(batch, source.dims) for name, spec in source.inputs.items()}
    work = count_work(onnx.load(str(path), load_external_data=False), shapes)
    if work is None or not work.macs:
        return None, "ONNX shape inference cannot size the source graph's products"
    per_sample = {op: n // batch for op, n in work.macs_by_op.items()}
    return Work(macs_by_op=per_sample, activation_elements=work.activation_elements // batch), ""


def distance(record: VariantRecord, work: Work, fixed_batch: int | None, peaks: Peaks) -> Distance:
    """One variant against its roofline at batch 1 (its fixed batch) and at its peak-throughput batch."""
    precision = roof_precision(record.precision)
    roof = peaks.roof(precision) or peaks.roof("fp32")
    if roof is None:
        return Distance(status="not counted", reason="no MAC rate measured here")
    held = precision if peaks.roof(precision) else "fp32"
    width = 2 if {"bf16", "fp16"} & set(record.precision.split("+")) else 4
    weights = (record.size_mb or 0.0) * 1e6
    overhead = peaks.overhead_ms.get(record.runtime)  # measured for onnxruntime and openvino
    overhead_ms = overhead.center if overhead else None

    def at(batch: int, seconds: float) -> dict:
        traffic = weights + work.activation_elements * width * batch
        return _point(work.macs * batch, traffic, seconds, roof[0], peaks, overhead_ms)

    call_batch = fixed_batch or 1
    one = at(call_batch, record.latency_ms.p50 / 1e3)  # type: ignore[union-attr]
    if one["of_bound"] > 1:  # faster than its own bound: the work, the bytes or the roof counted here are wrong
        return Distance(
            status="counting error",
            reason=f"measured at {one['of_bound']:.0%} of its {one['bound_by']} bound at batch {call_batch}, which no "
            f"call can reach: this graph's bytes, MACs or roof are miscounted ({one['because']})",
        )
    result = Distance(
        roof_precision=held,
        macs=work.macs,
        weight_mb=round(weights / 1e6, 3),
        activation_mb=round(work.activation_elements * width / 1e6, 4),
        intensity=round(one["intensity"], 3),
        achieved_gmacs=round(one["achieved"], 3),
        roof_gmacs=round(one["roof"], 3),
        of_bound=round(one["of_bound"], 4),
        bound_by=one["bound_by"],
    )
    throughput, miscounted = record.throughput_sps, ""
    samples = throughput is not None and throughput.unit is None  # a decoder's tokens/s has no count here
    at_peak = at(throughput.peak_batch, throughput.peak_batch / throughput.peak) if samples else None
    if at_peak and at_peak["of_bound"] > 1:
        miscounted = f"; at its peak-throughput batch the count gives {at_peak['of_bound']:.0%} (a counting error)"
    elif throughput and at_peak:
        batch = throughput.peak_batch
        result = result.model_copy(
            update={
                "peak_batch": batch,
                "intensity_peak": round(at_peak["intensity"], 3),
                "achieved_gmacs_peak": round(at_peak["achieved"], 3),
                "roof_gmacs_peak": round(at_peak["roof"], 3),
                "of_bound_peak": round(at_peak["of_bound"], 4),
                "bound_by_peak": at_peak["bound_by"],
            }
        )
    why = (
        f"reaches {result.of_bound:.1%} of its bound at batch {call_batch} ({result.achieved_gmacs:.3g} GMAC/s; "
        f"the roofline allows {result.roof_gmacs:.3g} under {roof[1]}'s {held.upper()} roof of {roof[0]:.4g}); "
        f"{one['because']}"
    )
    if result.of_bound_peak is not None:
        why += f"; {result.of_bound_peak:.1%} at its peak-throughput batch {result.peak_batch}"
    return result.model_copy(update={"why": why + miscounted})


def _point(macs: float, traffic: float, seconds: float, peak: float, peaks: Peaks, overhead_ms: float | None) -> dict:
    """One call of `macs` moving `traffic` bytes in `seconds`: achieved and bound GMAC/s, and what bounds it."""
    bandwidth, working_set = peaks.bandwidth(traffic) or (float("inf"), "?")
    intensity = macs / traffic if traffic else float("inf")
    roof = min(peak, intensity * bandwidth)
    floors = {  # the time a call cannot go below, by each limit, ms
        "compute": macs / (peak * 1e9) * 1e3,
        "memory": traffic / (bandwidth * 1e9) * 1e3,
        **({"overhead": overhead_ms} if overhead_ms is not None else {}),
    }
    bound_by = max(floors, key=floors.__getitem__)
    words = {
        "compute": f"its MACs at the roof take {floors['compute']:.3g} ms",
        "memory": f"its {traffic / 1e6:.3g} MB at {bandwidth:.3g} GB/s (read, {working_set} MB set) take "
        f"{floors['memory']:.3g} ms",
        "overhead": f"a zero-work call of its runtime takes {overhead_ms or 0:.3g} ms",
    }
    others = " and ".join(words[k] for k in floors if k != bound_by)
    because = f"{bound_by} bounds it: {words[bound_by]}, more than {others} (the call took {seconds * 1e3:.3g} ms)"
    return {"achieved": macs / seconds / 1e9, "roof": roof, "intensity": intensity, "bound_by": bound_by,
            "of_bound": floors[bound_by] / (seconds * 1e3), "because": because}  # fmt: skip
