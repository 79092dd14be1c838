"""What a model's figures say beyond the table: the traps the report warns about (FP16 slower than
FP32, INT8 no faster, noise, in-sample figures, failures, skips), the variants left out by design,
and which rows and outputs the quality figures rest on. Read from the records and the stored choice.
"""

from __future__ import annotations

from pipeline.core.outcome import Skip
from pipeline.core.readings import READINGS, reading
from pipeline.core.records import Choice, Kind, Records, VariantRecord
from pipeline.core.records.env import Cpu
from pipeline.core.registry import should_beat

# Variants that trade precision for speed, and the variant of the same runtime they should beat.
FP16_PAIRS, INT8_PAIRS = should_beat("fp16"), should_beat("int8")


MIN_GAIN = 0.05  # an INT8 variant less than 5% faster than its FP32 counterpart is "not faster"


def _ok(found: Records, *variants: str) -> bool:
    return all(v in found and found[v].ok for v in variants)


def _margin(found: Records, *variants: str) -> float:
    """The relative difference below which two p50s are not told apart: their intervals' half-widths
    together, at least 5% (figures taken minutes apart drift more than one interval says)."""
    return max(5.0, sum(found[v].p50_ci_pct or 0.0 for v in variants)) / 100.0


def on_gpu(record: VariantRecord) -> str:
    """For a variant measured on a GPU: where (the CPU's ISA says nothing there); else empty."""
    if record.device == "cpu":
        return ""
    gpu = record.gpu or {}
    return (
        f"measured on {record.device} ({gpu.get('gpu', '?')}, compute capability "
        f"{gpu.get('compute_capability', '?')}); nothing here measured where the time goes"
    )


def traps(found: Records, cpu: Cpu, choice: Choice) -> list[str]:
    """Known traps visible in one model's numbers and its recorded choice, one sentence each. Variants
    that do not apply to the model, or were not needed (their kind says so), are a fact, not a warning:
    the report lists them once, apart (not_built)."""
    warnings = []
    if choice.status == "none":
        warnings.append(f"No variant meets the constraints: {choice.why}. Nothing was deployed.")
    for fp16, fp32 in FP16_PAIRS.items():
        if _ok(found, fp16, fp32) and found[fp16].p50_ms > found[fp32].p50_ms * (1 + _margin(found, fp16, fp32)):
            cause = on_gpu(found[fp16]) or (
                "this CPU has no native FP16 arithmetic (reports/env.json: no AVX512-FP16 or AMX-FP16), so FP16 "
                "only saves size here"
                if not cpu.native_fp16
                else "although this CPU has native FP16 arithmetic (reports/env.json)"
            )
            warnings.append(
                f"`{fp16}` is slower than `{fp32}` at batch 1 (p50 {found[fp16].p50_ms:.4g} vs "
                f"{found[fp32].p50_ms:.4g} ms): {cause}."
            )
    for int8, fp32 in INT8_PAIRS.items():
        # "No faster" needs INT8 within 5% of FP32; noise widens no claim here (a noisy pair is flagged below).
        if _ok(found, int8, fp32) and found[int8].p50_ms > found[fp32].p50_ms * (1 - MIN_GAIN):
            fast, slow = found[int8].throughput_sps, found[fp32].throughput_sps
            peak = fast.peak / slow.peak if fast and slow else 1.0
            evidence = on_gpu(found[int8]) or (
                "this CPU lacks VNNI (reports/env.json), which INT8 matrix products need to be fast"
                if not cpu.vnni
                else "the CPU has VNNI (reports/env.json), so the ISA is not the cause; nothing here measured "
                "where the time goes"
            )
            batched = (
                f"; at its best batch size it does reach {peak:.2f}x FP32's peak throughput" if peak > 1.05 else ""
            )
            warnings.append(
                f"`{int8}` is not faster than `{fp32}` at batch 1 beyond noise (p50 {found[int8].p50_ms:.4g} vs "
                f"{found[fp32].p50_ms:.4g} ms): {evidence}{batched}."
            )
    noisy = {v: r.p50_ci_pct for v, r in found.items() if r.ok and r.noisy}
    if noisy:
        listed = ", ".join(f"`{v}` (±{n:.1f}%)" if n is not None else f"`{v}`" for v, n in sorted(noisy.items()))
        warnings.append(
            f"Noisy measurements: {listed}. Their p50's 95% interval stayed wider than the target until the "
            "time cap; the deploy choice does not rest on them alone (it is re-measured side by side)."
        )
    for variant, r in sorted(found.items()):
        if r.in_sample:
            warnings.append(
                f"`{variant}`'s accuracy and fidelity are in-sample: {r.in_sample} (the catalog's calib_data "
                "repeats eval rows); give calibration rows the eval data does not hold."
            )
    for variant, r in sorted(found.items()):
        if r.kind == Kind.FAILED:
            warnings.append(f"`{variant}` failed: {r.reason}")
    skipped: dict[str, list[str]] = {}
    for variant, r in sorted(found.items()):
        if r.kind == Kind.UNAVAILABLE:
            skipped.setdefault(r.reason, []).append(f"`{variant}`")
    for why, names in skipped.items():
        warnings.append(f"{', '.join(names)} {'was' if len(names) == 1 else 'were'} skipped: {why}")
    return warnings


def not_built(found: Records, not_applicable: dict[str, Skip]) -> list[str]:
    """One line per reason variants were left out by design: they do not apply to this model (no
    stages: the recorded choice's not_applicable), or the variant they would rescue already meets its constraints.
    Facts, not warnings."""
    grouped: dict[str, list[str]] = {}
    for variant, skip in not_applicable.items():
        grouped.setdefault(skip.reason, []).append(f"`{variant}`")
    for variant, r in sorted(found.items()):
        if r.kind in (Kind.NOT_APPLICABLE, Kind.NOT_NEEDED) and variant not in not_applicable:
            grouped.setdefault(r.reason, []).append(f"`{variant}`")
    return [f"{', '.join(names)}: {why}" for why, names in grouped.items()]


def scored_rows(found: Records, chosen: str | None) -> str | None:
    """Which rows the quality figures were taken on (the chosen variant's, else the first measured):
    a reader trusts an accuracy only knowing it was not calibrated or tuned on them."""
    measured = [(variant, r.accuracy) for variant, r in found.items() if r.ok and r.accuracy and r.accuracy.eval_origin]
    variant, accuracy = next((m for m in measured if m[0] == chosen), measured[0] if measured else (None, None))
    return accuracy and f"{accuracy.eval_origin}; {accuracy.eval_samples} of them scored for `{variant}`"


DECLARE = (
    "another reading is declared in the model's catalog entry: `judged_as: {{{name}: logits}}` (or {kinds}), "
    "`decision_threshold: {{{name}: 0.25}}`, "
    "`point_tolerance: {{{name}: 2.0}}`, or a task metric on labelled eval data (`metric:`, your function included)"
)


def judged_outputs(found: Records, metric_decides: bool = True) -> list[str]:
    """How each output was judged (pipeline.core.readings) and why, from the first measured
    record; with a task metric, which outputs it judges (alone, unless `metric_decides` is false)."""
    first = next((r for r in found.values() if r.ok and r.outputs), None)
    if first is None:
        return []
    metric = first.accuracy.metric if first.accuracy and first.accuracy.value is not None else None
    lines = []
    for i, (name, block) in enumerate(first.outputs.items()):
        if not block.output_kind:
            continue
        threshold = f"{block.decision_threshold:g}" if block.decision_threshold is not None else "its threshold"
        tolerance = f"{block.point_tolerance:.3g}" if block.point_tolerance is not None else "its tolerance"
        logit = f"{block.decision_logit:g}" if block.decision_logit is not None else "0"
        judged = reading(block.output_kind).verdict.format(threshold=threshold, logit=logit, tolerance=tolerance)
        why = f"; known from: {block.kind_from}" if block.kind_from else ""
        if metric and (first.metric_reads_every_output or i == 0):
            also = "and" if not metric_decides else "context:"
            judged = f"the task metric `{metric}` (max_metric_drop); {also} {judged}"
        lines.append(f"`{name}`: {judged}{why}")
    if lines:
        kinds = ", ".join(k for k in READINGS if k not in ("logits", "strings"))
        lines.append(DECLARE.format(name=next(iter(first.outputs)), kinds=kinds))
    return lines


def what_settled_full_precision(found: Records, chosen: str | None, rejected: dict[str, str]) -> list[str]:
    """When a full-precision variant ships, the faster ones measured here and why each lost: FP32 is then
    a conclusion from figures, not a default."""
    if chosen is None or not found[chosen].ok or not found[chosen].precision.startswith("fp32"):
        return []
    mine = found[chosen].p50_ms
    faster = sorted((r.p50_ms, v) for v, r in found.items() if r.ok and v in rejected and r.p50_ms < mine)
    return [f"`{v}` ({mine / p50:.2f}x faster by its own run): {rejected[v]}" for p50, v in faster]
