"""The pipeline's results on disk, written and read through this one module.

A benchmark's outcome is split in two files per model and variant:
- reports/metrics/<model>/<variant>.json: `Metrics`, the numbers a user diffs with
  `dvc metrics diff` (plus `status`), flat, in the unit each key names. Keep the names stable.
- reports/details/<model>/<variant>.json: the evidence, the full measurement (`latency_ms` with
  every percentile, per-batch throughput, per-output fidelity, reason, runtime settings, phase
  times, how each figure was taken). The summary, report, selection and gate read this one.
docs/metrics.md's schema table is generated from `Metrics` (python -m pipeline docs).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from pipeline.core import layout
from pipeline.core.evaluate import worst_row_cosine
from pipeline.core.files import read_json, write_json

Status = Literal["ok", "skipped", "failed"]


class Metrics(BaseModel):
    """One variant of one model on this machine: what DVC tracks as a metric."""

    model_config = ConfigDict(extra="forbid")

    status: Status = Field(description="ok, skipped (does not apply: the reason is in the details) or failed")
    p50_ms: float | None = Field(None, description="median batch-1 latency, ms")
    p50_ci_pct: float | None = Field(
        None, description="half-width of the p50's 95% confidence interval, % of p50 (median of the timed blocks)"
    )
    p99_ms: float | None = Field(None, description="99th-percentile batch-1 latency, ms")
    peak_sps: float | None = Field(None, description="peak samples/s of one synchronous caller over the batch sweep")
    footprint_mb: float | None = Field(
        None,
        description="the runtime's memory: peak RSS over load and batch-1 latency minus the process's RSS "
        "before loading, MB (what select's max_memory_mb limits)",
    )
    size_mb: float | None = Field(None, description="the artifact's files on disk, MB")
    load_ms: float | None = Field(None, description="time to load the artifact into its runtime, ms")
    acc_delta: float | None = Field(None, description="task metric minus the FP32 source's (models with labels)")
    cosine_min: float | None = Field(
        None, description="worst row's cosine with the FP32 source, over every output (scoring rows)"
    )
    # text generation (p50_ms/p99_ms are then the time per output token, peak_sps tokens/s)
    ttft_ms: float | None = Field(None, description="text generation: time to first token at the shortest prompt, ms")
    tpot_p90_ms: float | None = Field(None, description="text generation: 90th-percentile time per output token, ms")
    ppl_increase_pct: float | None = Field(
        None, description="text generation: perplexity on held-out text over the FP32 source's, % increase"
    )
    top1_agreement: float | None = Field(
        None, description="text generation: share of positions whose next token matches the FP32 source's"
    )

    @classmethod
    def from_details(cls, details: dict[str, Any]) -> Metrics:
        """The tracked numbers of a full measurement record (the details file's content)."""
        if details["status"] != "ok":
            return cls(status=details["status"])
        latency, throughput = details["latency_ms"], details["throughput_sps"]
        return cls(
            status="ok",
            p50_ms=latency["p50"],
            p50_ci_pct=details.get("p50_ci_pct"),
            p99_ms=latency["p99"],
            peak_sps=throughput["peak"],
            footprint_mb=details["footprint_mb"],
            size_mb=details["size_mb"],
            load_ms=details["load_ms"],
            acc_delta=(details.get("accuracy") or {}).get("delta"),
            cosine_min=worst_row_cosine(details.get("fidelity")),
            **generation_metrics(details),
        )


def generation_metrics(details: dict[str, Any]) -> dict[str, float]:
    """The tracked figures of a text-generation record; nothing for other models."""
    generation = details.get("generation")
    if not generation:
        return {}
    return {
        "ttft_ms": next(iter(generation["ttft_ms"].values())),
        "tpot_p90_ms": generation["tpot_ms"]["p90"],
        "ppl_increase_pct": details["perplexity"]["increase_pct"],
        "top1_agreement": details["fidelity"]["logits"]["top1_agreement"],
    }


def write(model: str, variant: str, details: dict[str, Any], root: Path = Path(".")) -> Metrics:
    """Write one variant's details and the metrics taken from them."""
    metrics = Metrics.from_details(details)
    write_json(layout.details_file(model, variant, root), details)
    write_json(layout.metrics_file(model, variant, root), metrics.model_dump(exclude_none=True))
    return metrics


def read_metrics(model: str, root: Path = Path(".")) -> dict[str, Metrics]:
    """The tracked metrics of every variant of `model` that has a file, keyed by variant."""
    folder = layout.metrics_dir(root) / model
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    return {p.stem: Metrics.model_validate(read_json(p)) for p in files}


def load_details(model: str, root: Path = Path(".")) -> dict[str, dict[str, Any]]:
    """The full record (details) of every variant of `model` measured here, keyed by variant: what
    the selection, summary, report and gate read."""
    folder = layout.details_dir(root) / model
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    return {p.stem: read_json(p) for p in files}


def load_env(root: Path = Path(".")) -> dict[str, Any]:
    """The machine fingerprint the numbers belong to (reports/env.json); {} before the env stage ran."""
    path = layout.env_file(root)
    return read_json(path) if path.exists() else {}
