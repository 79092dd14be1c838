"""The pipeline's results on disk: one typed record per model and variant, written and read here only.

`VariantRecord` is the whole outcome of one variant on this machine (reports/details/<model>/<variant>.json):
how it ended (`status`, `kind`, `reason`), what it is (runtime, precision as executed, target), and
what the bench worker measured (`Measured`: latency with its interval, throughput per batch, memory,
fidelity per output, accuracy, generation figures). The bench worker builds the `Measured` part in
its own process, the bench stage adds the facts and writes the record; the summary, report,
selection, deploy and gate read typed fields from `load`.

`Metrics` is derived from it: the flat numbers a user diffs with `dvc metrics diff`
(reports/metrics/<model>/<variant>.json). docs/metrics.md's schema table is generated from `Metrics`
(python -m pipeline docs). Keep both files' key names stable: users diff them across revisions, and
the gate reads older revisions' records with `parse(..., lenient=True)`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from pipeline.core import layout
from pipeline.core.files import read_json, write_json
from pipeline.core.outcome import Kind, Status
from pipeline.core.records.base import Part
from pipeline.core.records.build import BuildFacts


class LatencyStats(Part):
    """Percentiles of one timed loop, ms (a decoder's: time per output token)."""

    p50: float
    p90: float
    p99: float | None = None  # not for the time per token of a decoder's few runs
    mean: float
    std: float | None = None
    n: int


class Interval(Part):
    """The p50's 95% confidence interval (order statistics of the block medians), ms."""

    low: float
    high: float
    blocks: int


class SampleRateInterval(Part):
    """A throughput's 95% interval over its timed blocks (None where too few blocks gave none)."""

    low: float | None
    high: float | None
    half_width_pct: float | None
    blocks: int


class Throughput(Part):
    """Samples (or generated tokens) per second of one synchronous caller at each batch size."""

    peak: float
    peak_batch: int
    by_batch: dict[str, float]  # keyed "b<batch>": DVC drops lists
    stopped_by: str = ""
    unit: str | None = None  # decoders: generated tokens / s


class Accuracy(Part):
    """The task metric on the held-out scoring rows and its delta against the FP32 source's."""

    metric: str
    value: float | None = None
    source_value: float | None = None
    delta: float | None = None
    eval_samples: int | None = None
    eval_origin: str | None = None


class OutputFidelity(Part):
    """One output against the FP32 source on the same rows (pipeline.core.evaluate.output_fidelity), or a
    decoder's logits (pipeline.measure.generation.quality)."""

    # what the output was judged as (pipeline.core.evaluate.output_kind): class_scores, embedding,
    # channels (a mixed-scale grid) or values; None in records written before it was recorded
    output_kind: str | None = None
    cosine_mean: float | None = None
    cosine_min: float | None = None  # the worst row's cosine
    rel_l2: float | None = None
    max_abs_diff: float | None = None
    max_rel_diff: float | None = None  # relative to the output's range
    values_per_row: int | None = None
    top1_agreement: float | None = None
    top1_agreement_min: float | None = None  # decoders: the worst row's next-token agreement
    # embeddings (several values per row, not class scores): the source's 10 nearest rows kept, and
    # Spearman's correlation of every pair's similarity (pipeline.core.evaluate.neighbour_agreement)
    neighbour_recall: float | None = None
    similarity_rank_corr: float | None = None
    # a mixed-scale grid: the worst channel's max error relative to that channel's reference peak, and which
    channel_error: float | None = None
    worst_channel: str | None = None
    rows: int | None = None

    @property
    def one_value_per_row(self) -> bool:
        """A probability or score: its cosine over the column can stay at 0.997 while one row moves from
        0.1 to 0.86, so its error decides."""
        return self.values_per_row == 1

    @property
    def score(self) -> float | None:
        """Fidelity on the worst row, 1 = identical: 1 - the worst channel's relative error for a mixed-scale
        grid, 1 - the error relative to the output's range for one value per row, else the worst row's cosine."""
        if self.channel_error is not None:
            return 1.0 - self.channel_error
        if self.one_value_per_row:
            return None if self.max_rel_diff is None else 1.0 - self.max_rel_diff
        return self.cosine_min


class Screen(Part):
    """How much the bench measured, and why (pipeline.measure.budget)."""

    budget: Literal["full", "short"]
    reason: str
    best_known: str | None = None  # the variant it was compared with, when there was one


class EvalRows(Part):
    """How many scoring rows accuracy and fidelity were computed on, of how many, and by which rule."""

    used: int
    available: int
    rule: str


class Stability(Part):
    """How the batch-1 latency loop ended, and what else used the CPU meanwhile."""

    blocks: int
    calls: int
    seconds: float
    stopped_by: str
    other_cpu_pct: float
    steal_pct: float


class Generation(Part):
    """A decoder's generation figures (pipeline.measure.generation)."""

    ttft_ms: dict[str, float]  # keyed "p<prompt length>"
    tpot_ms: LatencyStats
    tokens_per_s: dict[str, float]
    context_tokens: int
    context_footprint_mb: float
    kv_cache_mb_fp32: float
    how: str


class Perplexity(Part):
    """A decoder's perplexity on held-out text against the FP32 source's (what max_ppl_increase_pct limits)."""

    source: float
    variant: float
    increase_pct: float
    rows: int
    tokens: int


class Measured(Part):
    """What a bench worker measured, in its own process (pipeline.measure.worker, .generation). Every field
    is None on a variant that was not measured."""

    load_ms: float | None = Field(None, description="time to load the artifact into its runtime, ms")
    load_cached_ms: float | None = Field(
        None, description="the same load from the runtime's compiled-model cache, ms (runtimes that cache)"
    )
    first_infer_ms: float | None = Field(
        None, description="the first call after the load (a decoder: the first generation), ms"
    )
    latency_ms: LatencyStats | None = None
    latency_is: str | None = Field(
        None, description="what `latency_ms` times when it is not a batch-1 call (decoders: the time per output token)"
    )
    p50_ci_ms: Interval | None = None
    p50_ci_pct: float | None = Field(None, description="half-width of the p50's 95% interval, % of p50")
    noisy: bool | None = Field(
        None, description="the p50's interval stayed wider than bench.latency.target_pct until the time cap"
    )
    p99_low_confidence: bool | None = Field(None, description="the p99 rests on fewer than 1000 calls")
    screen: Screen | None = Field(
        None,
        description="the measuring budget: full, or short for a variant out of contention (its p50 interval "
        "starts above bench.contention_ratio x the top of the best known p50 interval of the same model on this "
        "machine: latency to its minimum blocks, no throughput, concurrent or dim sweep), why, and the variant "
        "compared with (best_known)",
    )
    throughput_sps: Throughput | None = Field(
        None,
        description="samples (or generated tokens) per second of one synchronous caller at each batch size; "
        "absent on a short budget (out of contention: see screen)",
    )
    throughput_concurrent: dict[str, Any] | None = Field(
        None, description="samples/s with several batch-1 requests in flight, and how the runtime ran them"
    )
    peak_rss_mb: float | None = Field(
        None, description="peak RSS of the bench process over load and batch-1 latency, MB"
    )
    footprint_mb: float | None = Field(
        None, description="peak_rss_mb minus the process before loading: the runtime's own memory, MB"
    )
    load_rss_mb: float | None = Field(None, description="RSS right after the load, MB")
    rss_mb_by_batch: dict[str, float] | None = Field(None, description="peak RSS at each batch size of the sweep, MB")
    cpu_util_pct: dict[str, float] | None = Field(
        None, description="this process's CPU time over wall time per phase (latency, sweep), %"
    )
    energy: dict[str, Any] | None = Field(
        None, description="energy per inference from RAPL where the machine exposes it, else why not"
    )
    gpu_memory_mb: float | None = Field(None, description="GPU memory of the bench process (GPU targets), MB")
    gpu_util_pct: float | None = Field(
        None, description="mean GPU utilisation over the batch-1 latency (GPU targets), %"
    )
    dims: dict[str, int] | None = Field(
        None, description="the values of the symbolic dimensions the figures were measured at"
    )
    fixed_batch: int | None = Field(None, description="the batch the model is fixed to (its 'batch 1'), if any")
    latency_ms_by_dim: dict[str, dict[str, dict[str, float | int | None]]] | None = Field(
        None, description="batch-1 latency at each value of dim_sweep's dimensions"
    )
    accuracy: Accuracy | None = None
    fidelity: dict[str, OutputFidelity] | None = None
    fidelity_batch: int | None = Field(
        None,
        description="the batch accuracy and fidelity were computed at: the variant's peak-throughput batch, "
        "at most bench.eval_batch (bench.eval_batch without a sweep; the fixed batch of a fixed-batch model)",
    )
    eval_rows: EvalRows | None = Field(
        None,
        description="the scoring rows accuracy and fidelity used, of those held out, and the rule: every "
        "labelled row; unlabelled, the fewest whose worst row bounds the rest (bench.unlabelled_rows)",
    )
    inference_precision: str | None = Field(None, description="what the runtime says it computed in")
    generation: Generation | None = None
    perplexity: Perplexity | None = None
    import_ms: float | None = Field(None, description="time to import the runtime's module, ms")
    runtime_rss_mb: float | None = Field(None, description="RSS after importing the runtime, MB")
    phase_s: dict[str, float] | None = Field(None, description="wall-clock seconds of each benchmark phase")
    baseline_rss_mb: float | None = Field(None, description="RSS of the bench process before loading, MB")
    memory_how: str | None = Field(None, description="how peak memory was read")
    latency_min_ms: float | None = Field(None, description="the fastest batch-1 call, ms")
    latency_max_ms: float | None = Field(None, description="the slowest batch-1 call, ms")
    stability: Stability | None = None
    sweep_load: dict[str, float] | None = Field(
        None, description="CPU other processes and the hypervisor took during the sweep, %"
    )
    throughput_ci: dict[str, SampleRateInterval] | None = None
    runtime_settings: dict[str, Any] | None = Field(
        None, description="the runtime's own settings (threads, providers, hints)"
    )
    batching: dict[str, Any] | None = Field(None, description="the memory-bounded batch sizes and how they were found")
    eval_origin: str | None = Field(None, description="decoders: where the held-out windows came from")

    @property
    def out_of_contention(self) -> bool:
        """Measured on the short budget: no throughput, concurrent or dim sweep (`screen.reason` says why)."""
        return self.screen is not None and self.screen.budget == "short"

    @property
    def accuracy_drop(self) -> float | None:
        """The FP32 source's task metric minus this variant's (negative: the variant scores higher)."""
        return None if self.accuracy_delta is None else 0.0 - self.accuracy_delta  # never -0.0

    @property
    def ppl_increase_pct(self) -> float | None:
        """A decoder's held-out perplexity over the FP32 source's, %."""
        return self.perplexity.increase_pct if self.perplexity else None

    @property
    def accuracy_delta(self) -> float | None:
        """Task metric minus the FP32 source's; None without labels or a task metric."""
        return self.accuracy.delta if self.accuracy else None

    @property
    def outputs(self) -> dict[str, OutputFidelity]:
        return self.fidelity or {}

    def _lowest(self, figure: str) -> float | None:
        """The lowest of one OutputFidelity figure over the outputs that have it: the worst decides."""
        values = [value for f in self.outputs.values() if (value := getattr(f, figure)) is not None]
        return min(values) if values else None

    @property
    def worst_cosine(self) -> float | None:
        """The lowest per-row cosine over every output: one broken output or row decides."""
        return self._lowest("cosine_min")

    @property
    def worst_channel_error(self) -> float | None:
        """The largest channel error over the mixed-scale grid outputs (what judges them, not the cosine)."""
        values = [f.channel_error for f in self.outputs.values() if f.channel_error is not None]
        return max(values) if values else None

    @property
    def worst_output_score(self) -> float | None:
        """The worst output's score (OutputFidelity.score): what ties are broken on and the Pareto front weighs."""
        return self._lowest("score")

    @property
    def top1_agreement(self) -> float | None:
        """The first output's (the class scores', or a decoder's logits') top-1 agreement with the source."""
        first = next(iter(self.outputs.values()), None)
        return first.top1_agreement if first else None

    @property
    def neighbour_recall(self) -> float | None:
        """The lowest recall@10 of the source's nearest neighbours over the embedding outputs."""
        return self._lowest("neighbour_recall")

    @property
    def similarity_rank_corr(self) -> float | None:
        """The lowest rank correlation of pairwise similarities over the embedding outputs."""
        return self._lowest("similarity_rank_corr")


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


class Metrics(BaseModel):
    """One variant of one model on this machine: what DVC tracks as a metric."""

    model_config = ConfigDict(extra="forbid")

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
    acc_delta: float | None = Field(None, description="task metric minus the FP32 source's (models with labels)")
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


def read_metrics(model: str, root: Path = Path(".")) -> dict[str, Metrics]:
    """The tracked metrics of every variant of `model` that has a file, keyed by variant."""
    folder = layout.metrics_dir(root) / model
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    return {p.stem: Metrics.model_validate(read_json(p)) for p in files}
