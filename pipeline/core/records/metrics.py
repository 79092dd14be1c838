"""The flat numbers a user diffs with `dvc metrics diff` (reports/metrics/<model>/<variant>.json), derived
from the variant record (VariantRecord.metrics). docs/metrics.md's schema table is generated from
`Metrics` (python -m pipeline docs); keep its key names stable: users diff them across revisions."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from pipeline.core import layout
from pipeline.core.files import read_json
from pipeline.core.outcome import Status
from pipeline.core.records.base import Part


class Metrics(Part):
    """One variant of one model on this machine: what DVC tracks as a metric."""

    status: Status = Field(description="ok, skipped (does not apply: the reason is in the details) or failed")
    p50_ms: float | None = Field(None, description="median batch-1 latency, ms")
    p50_ci_pct: float | None = Field(
        None, description="half-width of the p50's 95% confidence interval, % of p50 (median of the timed blocks)"
    )
    p99_ms: float | None = Field(None, description="99th-percentile batch-1 latency, ms")
    peak_sps: float | None = Field(
        None,
        description="peak samples/s of one synchronous caller over the batch sweep (absent: out of contention, "
        "no sweep; the details' screen says why)",
    )
    footprint_mb: float | None = Field(
        None,
        description="the runtime's memory: peak RSS over load and batch-1 latency minus the process's RSS "
        "before loading, MB (what select's max_memory_mb limits)",
    )
    size_mb: float | None = Field(None, description="the artifact's files on disk, MB")
    load_ms: float | None = Field(None, description="time to load the artifact into its runtime, ms")
    acc_delta: float | None = Field(
        None,
        description="task metric minus the FP32 source's, in its units (models with labels; a built-in or your "
        "function; an error rate's rise is positive)",
    )
    decision_f1: float | None = Field(
        None,
        description="F1 of the variant's decisions at each output's threshold against the FP32 source's "
        "(probabilities, a detector's scores; the worst output)",
    )
    cosine_min: float | None = Field(
        None, description="worst row's cosine with the FP32 source, over every output (scoring rows)"
    )
    top1_agreement: float | None = Field(
        None,
        description="share of rows whose top-1 class matches the FP32 source's (class scores; text generation: "
        "of positions whose next token matches)",
    )
    neighbour_recall: float | None = Field(
        None,
        description="embeddings: mean recall@10 of each scoring row's nearest rows under the FP32 source (worst "
        "embedding output)",
    )
    similarity_rank_corr: float | None = Field(
        None, description="embeddings: Spearman correlation of all pairwise similarities with the FP32 source's"
    )
    # text generation (p50_ms/p99_ms are then the time per output token, peak_sps tokens/s)
    ttft_ms: float | None = Field(None, description="text generation: time to first token at the shortest prompt, ms")
    tpot_p90_ms: float | None = Field(None, description="text generation: 90th-percentile time per output token, ms")
    ppl_increase_pct: float | None = Field(
        None, description="text generation: perplexity on held-out text over the FP32 source's, % increase"
    )


def read_metrics(model: str, root: Path = Path(".")) -> dict[str, Metrics]:
    """The tracked metrics of every variant of `model` that has a file, keyed by variant."""
    folder = layout.metrics_dir(root) / model
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    return {p.stem: Metrics.model_validate(read_json(p)) for p in files}
