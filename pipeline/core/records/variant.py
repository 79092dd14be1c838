"""One variant's outcome on this machine (reports/details/<model>/<variant>.json), written and read here only.

`VariantRecord` is how the variant ended (`status`, `kind`, `reason`), what it is (runtime, precision as
executed, target), and what the bench worker measured (`Measured`, pipeline.core.records.measured). The
bench worker builds the `Measured` part in its own process, the bench stage adds the facts and writes the
record with the metrics derived from it; the summary, report, selection, deploy and gate read typed
fields from `load`. Keep its key names stable: the gate reads older revisions' records with
`parse(..., lenient=True)`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from pipeline.core import layout
from pipeline.core.files import read_json, write_json
from pipeline.core.outcome import Kind, Status
from pipeline.core.records.build import BuildFacts
from pipeline.core.records.measured import Measured
from pipeline.core.records.metrics import Metrics


class VariantRecord(Measured):
    """One variant of one model on this machine: how it ended, what it is, and what was measured."""

    status: Status = Field(description="ok, skipped or failed (what the metrics file tracks)")
    kind: Kind = Field(
        description="how it ended: ok, failed, skipped-not-applicable, skipped-not-needed, skipped-unavailable"
    )
    reason: str = Field("", description="why it failed or was skipped, in one line")
    runtime: str = Field(description="the runtime that runs the artifact")
    precision: str = Field(description="the precision as executed (the runtime's word), e.g. int8+bf16")
    precision_declared: str | None = Field(None, description="the catalogue's precision, when the executed one differs")
    precision_note: str | None = Field(None, description="the runtime's note on the executed precision")
    device: str = Field("cpu", description="the target it ran on (cpu, cuda:0)")
    threads: int | None = Field(None, description="intra-op threads of the benchmark")
    machine: str | None = Field(None, description="the machine name the figures belong to")
    gpu: dict[str, Any] | None = Field(None, description="which GPU, driver and compute capability (GPU targets)")
    build: BuildFacts = Field(
        default_factory=BuildFacts,
        description="the pass's own facts (build.json): settings, node counts, recipes, seconds",
    )
    size_mb: float | None = Field(None, description="the artifact's files on disk, MB")
    in_sample: str | None = Field(None, description="why accuracy and fidelity are not held out, when they are not")
    process_s: float | None = Field(None, description="wall time of the bench process, s")
    waited_s: float | None = Field(
        None, description="time waited for the machine lock (a build or benchmark was running), s"
    )

    @model_validator(mode="before")
    @classmethod
    def _kind_from_status(cls, data: Any) -> Any:
        """Records written before `kind` existed (older revisions, read by the gate): skipped ones
        become 'unavailable', the kind that warns rather than hides."""
        if isinstance(data, dict) and "kind" not in data and "status" in data:
            data = data | {"kind": {"skipped": Kind.UNAVAILABLE}.get(data["status"], data["status"])}
        return data

    @model_validator(mode="after")
    def _status_matches_kind(self) -> VariantRecord:
        if self.kind.status != self.status:
            raise ValueError(f"status {self.status!r} does not match kind {self.kind.value!r}")
        return self

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def p50_ms(self) -> float:
        """The batch-1 p50 (a decoder's time per output token) of a measured variant."""
        return self.latency("p50")

    def latency(self, percentile: str) -> float:
        """The batch-1 latency at `percentile` (p50, p90, p99) of a measured variant, ms."""
        if self.latency_ms is None:
            raise ValueError(f"{self.status} variant has no latency ({self.reason})")
        value = getattr(self.latency_ms, percentile)
        if value is None:
            raise ValueError(f"no {percentile} latency recorded")
        return value

    def metrics(self) -> Metrics:
        """The tracked numbers: what DVC diffs."""
        if not self.ok:
            return Metrics(status=self.status)
        assert self.latency_ms is not None
        return Metrics(
            status="ok",
            p50_ms=self.latency_ms.p50,
            p50_ci_pct=self.p50_ci_pct,
            p99_ms=self.latency_ms.p99,
            peak_sps=self.throughput_sps.peak if self.throughput_sps else None,  # none: out of contention
            footprint_mb=self.footprint_mb,
            size_mb=self.size_mb,
            load_ms=self.load_ms,
            acc_delta=self.accuracy_delta,
            cosine_min=self.worst_cosine,
            top1_agreement=self.top1_agreement,
            decision_f1=self.decision_f1,
            neighbour_recall=self.neighbour_recall,
            similarity_rank_corr=self.similarity_rank_corr,
            **(
                {
                    "ttft_ms": next(iter(self.generation.ttft_ms.values())),
                    "tpot_p90_ms": self.generation.tpot_ms.p90,
                    "ppl_increase_pct": self.perplexity.increase_pct if self.perplexity else None,
                }
                if self.generation
                else {}
            ),
        )


Records = dict[str, VariantRecord]  # one model's variants, keyed by variant name


def parse(data: dict[str, Any], lenient: bool = False) -> VariantRecord:
    """A record from a details file's content. `lenient` drops keys this version does not know: for
    records of older revisions (the gate's base), never for what this version writes."""
    return VariantRecord.model_validate(
        {k: v for k, v in data.items() if k in VariantRecord.model_fields} if lenient else data
    )


def write(model: str, variant: str, record: VariantRecord, root: Path = Path(".")) -> Metrics:
    """Write one variant's record (the fields its writers set, a null included) and the metrics taken from it."""
    metrics = record.metrics()
    write_json(layout.details_file(model, variant, root), record.model_dump(mode="json", exclude_unset=True))
    write_json(layout.metrics_file(model, variant, root), metrics.model_dump(exclude_none=True))
    return metrics


def load(model: str, root: Path = Path(".")) -> Records:
    """Every variant of `model` measured under `root`, keyed by variant: what the selection, summary,
    report and gate read."""
    folder = layout.details_dir(root) / model
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    return {p.stem: parse(read_json(p)) for p in files}
