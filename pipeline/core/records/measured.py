"""What the bench worker measures in its own process (`Measured`) and the typed figures it holds: each
type that measures (`LatencyStats.from_ns`) is the type recorded in reports/details."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from pydantic import ConfigDict, Field

from pipeline.core.records.base import Part

P99_MIN_CALLS = 1000  # a p99 from fewer calls rests on fewer than 10 samples beyond it


class LatencyStats(Part):
    """Percentiles of one timed loop, ms (a decoder's: time per output token): what the harness
    measures (`from_ns`) is what the record holds."""

    p50: float
    p90: float
    p99: float | None = None  # not for the time per token of a decoder's few runs
    mean: float
    std: float | None = None
    min: float | None = None  # the fastest and the slowest call
    max: float | None = None
    n: int

    @classmethod
    def from_ns(cls, samples_ns: Any) -> LatencyStats:
        """From per-call timings in nanoseconds."""
        ms = np.asarray(samples_ns, dtype=np.float64) / 1e6
        p50, p90, p99 = np.percentile(ms, [50, 90, 99])
        return cls(
            p50=float(p50),
            p90=float(p90),
            p99=float(p99),
            mean=float(ms.mean()),
            std=float(ms.std(ddof=1)) if len(ms) > 1 else 0.0,
            min=float(ms.min()),
            max=float(ms.max()),
            n=len(ms),
        )

    @property
    def p99_low_confidence(self) -> bool:
        return self.n < P99_MIN_CALLS


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


class ConcurrentThroughput(Part):
    """Samples/s with several batch-1 requests in flight, and how the runtime ran them: the settings a
    server's instances reproduce (pipeline.serve)."""

    sps: float
    batch: int
    total_threads: int
    harness_limit_sps: float
    harness_bound: bool
    requests: int = Field(description="requests in flight: ONNX Runtime's sessions, OpenVINO's infer requests")
    how: str
    streams: int | None = None  # OpenVINO's THROUGHPUT hint
    threads: int | None = None  # OpenVINO: the threads its streams share


class Accuracy(Part):
    """The task metric on the held-out scoring rows and its delta against the FP32 source's."""

    metric: str
    higher_is_better: bool = True  # an error rate (cer, a user's) is lower-is-better
    reads_every_output: bool = False  # a user's function; a built-in reads the first output
    value: float | None = None
    source_value: float | None = None
    delta: float | None = None  # the variant's value minus the source's, in the metric's units
    eval_samples: int | None = None
    eval_origin: str | None = None

    @property
    def drop(self) -> float | None:
        """How much worse than the source, in the metric's units (negative: the variant scores better)."""
        if self.delta is None:
            return None
        return 0.0 - self.delta if self.higher_is_better else self.delta + 0.0  # never -0.0

    @property
    def relative_drop(self) -> float | None:
        """The drop as a fraction of the source's value (None when that is 0 or unknown)."""
        drop = self.drop
        return None if drop is None or not self.source_value else drop / abs(self.source_value)


class OutputFidelity(Part):
    """One output against the FP32 source on the same rows (pipeline.core.evaluate.output_fidelity), or a
    decoder's logits (pipeline.measure.generation.quality)."""

    # what the output was read as (a pipeline.core.readings.READINGS name: class_scores, probabilities, embedding,
    # channels, ..., values), and how that was known; None in older records
    output_kind: str | None = None
    kind_from: str | None = None
    cosine_mean: float | None = None
    cosine_min: float | None = None  # the worst row's cosine
    rel_l2: float | None = None
    max_abs_diff: float | None = None
    max_rel_diff: float | None = None  # relative to the output's range
    values_per_row: int | None = None
    top1_agreement: float | None = None
    top1_agreement_min: float | None = None  # decoders: the worst row's next-token agreement
    sequences_kept: float | None = None  # class scores over positions: rows whose every position kept its class
    # embeddings (several values per row, not class scores): the source's 10 nearest rows kept, and
    # Spearman's correlation of every pair's similarity (pipeline.core.decisions.neighbour_agreement)
    neighbour_recall: float | None = None
    similarity_rank_corr: float | None = None
    # a mixed-scale grid: the worst channel's max error relative to that channel's reference peak, and which
    channel_error: float | None = None
    worst_channel: str | None = None
    # probabilities (and a grid's probability channels, pooled): the decisions at a threshold, the variant's
    # against the source's (pipeline.core.decisions.Decisions); f1 None: neither decided any value positive
    decision_threshold: float | None = None
    decision_f1: float | None = None
    decision_flips: int | None = None
    decision_positives: int | None = None
    worst_decision_channel: str | None = None
    decision_logit: float | None = None  # logits: the raw score the threshold's probability maps to (0 for 0.5)
    # points: coordinates per point, the tolerance (output's units), the share of points within it and of rows
    # whose every point is, the largest displacement and where (pipeline.core.decisions.Points)
    point_dims: int | None = None
    point_tolerance: float | None = None
    points_within: float | None = None
    rows_within: float | None = None
    max_displacement: float | None = None
    worst_point: str | None = None
    # a ranking: the share of row pairs the source tells apart kept in its order (pipeline.core.decisions.pairs_ordered;
    # decision_flips: the rows that moved past another)
    pairs_ordered: float | None = None
    rows: int | None = None
    # values no reading fits (pipeline.core.readings.Values): scored by the worse of the worst row's cosine and
    # 1 - the largest relative error, not by the cosine alone
    error_scored: bool | None = None

    @property
    def one_value_per_row(self) -> bool:
        """A probability or score: its cosine over the column can stay at 0.997 while one row moves from
        0.1 to 0.86, so its error decides."""
        return self.values_per_row == 1

    @property
    def decides(self) -> bool:
        """Judged by the decisions read off it (pipeline.core.readings: its reading left a decision figure), not by
        similarity: its cosine and relative error are context."""
        figures = (self.top1_agreement, self.sequences_kept, self.decision_f1, self.decision_flips, self.rows_within,
                   self.pairs_ordered, self.channel_error)  # fmt: skip
        return any(f is not None for f in figures)

    @property
    def score(self) -> float | None:
        """Fidelity, 1 = identical: for an output judged by its decisions the worst of its decision figures
        (top-1 agreement, decision F1, 1 - a grid's worst coordinate error, the share of rows whose points stay; 1 if it
        makes no decision); else 1 - the error relative to the output's range for one value per row, the worse
        of the worst row's cosine and 1 - that error for values no reading fits, or the worst row's cosine."""
        figures = [self.top1_agreement, self.sequences_kept, self.decision_f1, self.rows_within, self.pairs_ordered]
        figures += [] if self.channel_error is None else [1.0 - self.channel_error]
        if self.decides:
            return min((f for f in figures if f is not None), default=1.0)
        if self.one_value_per_row:
            return None if self.max_rel_diff is None else 1.0 - self.max_rel_diff
        if self.error_scored and self.max_rel_diff is not None and self.cosine_min is not None:
            return min(self.cosine_min, 1.0 - self.max_rel_diff)
        return self.cosine_min


class EdgeRows(Part):
    """A tree ensemble's rows on its own split thresholds (pipeline.prepare.sources.trees: each threshold and one
    float step either side), the variant against the library there: where a moved threshold takes a row down the
    other branch."""

    rows: int
    origin: str
    moved: int  # rows whose answer moved past float rounding (1e-5 of the output's largest magnitude): a leaf elsewhere
    fidelity: dict[str, OutputFidelity]

    def changed(self, name: str) -> int | None:
        """Rows whose decision on output `name` differs from the library's: the flips at its threshold, or the
        rows whose class changed; None for an output that decides nothing (values)."""
        block = self.fidelity[name]
        if block.decision_flips is not None:
            return block.decision_flips
        if block.top1_agreement is not None:
            return round((1.0 - block.top1_agreement) * self.rows)
        return None


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
    # unlabelled rows: the fewest whose worst bounds the rest (bench.unlabelled_rows, at this variant's budget),
    # kept with the figure it bounds so a reader quotes it, not today's params; None with labels or in older records
    bound: int | None = None


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


class RuntimeSettings(Part):
    """The runtime's own settings, as its session reports them (Session.details in pipeline.runtimes): what the
    figures were measured with, and what a server's configuration reproduces (pipeline.serve). Each runtime types
    its own keys in its adapter module (`Details`, a subclass: pipeline.runtimes.ort.Details, .ov.Details, ...);
    the record keeps them as they are, so a new runtime adds no field here. The two typed here are read for
    every runtime."""

    model_config = ConfigDict(extra="allow")

    inference_precision: str | None = None  # what it computed in, where the runtime says (bench.honest_precision)
    layout: str | None = None  # a model not rows first: fed in its own layout (pipeline.runtimes.layout)

    def as_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)


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
    throughput_concurrent: ConcurrentThroughput | None = Field(
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
    edge_rows: EdgeRows | None = Field(
        None, description="a tree ensemble's split-threshold rows: how many moved, each output's decisions there"
    )
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
    stability: Stability | None = None
    sweep_load: dict[str, float] | None = Field(
        None, description="CPU other processes and the hypervisor took during the sweep, %"
    )
    throughput_ci: dict[str, SampleRateInterval] | None = Field(
        None, description="the 95% interval of each batch's samples/s in throughput_sps (keyed b<batch>)"
    )
    runtime_settings: RuntimeSettings | None = Field(
        None,
        description="the runtime's own settings (threads, providers, hints), each runtime's keys as its adapter "
        "module types them (`Details` in pipeline/runtimes/<adapter>.py)",
    )
    batching: dict[str, Any] | None = Field(None, description="the memory-bounded batch sizes and how they were found")
    eval_origin: str | None = Field(None, description="decoders: where the held-out windows came from")

    @property
    def out_of_contention(self) -> bool:
        """Measured on the short budget: no throughput, concurrent or dim sweep (`screen.reason` says why)."""
        return self.screen is not None and self.screen.budget == "short"

    def throughput_interval(self, batch: int) -> SampleRateInterval | None:
        """The 95% interval of one caller's samples/s at `batch`; None where the sweep did not reach it."""
        return (self.throughput_ci or {}).get(f"b{batch}")

    @property
    def accuracy_drop(self) -> float | None:
        """How much worse than the FP32 source the task metric is, in its units (negative: scores better)."""
        return self.accuracy.drop if self.accuracy else None

    @property
    def accuracy_relative_drop(self) -> float | None:
        return self.accuracy.relative_drop if self.accuracy else None

    @property
    def metric_reads_every_output(self) -> bool:
        return bool(self.accuracy and self.accuracy.reads_every_output)

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
        """The lowest top-1 agreement with the source over the class-score outputs (a decoder's logits)."""
        return self._lowest("top1_agreement")

    @property
    def decision_f1(self) -> float | None:
        """The lowest decision F1 over the outputs read at a threshold (probabilities, a grid's scores)."""
        return self._lowest("decision_f1")

    @property
    def rows_within(self) -> float | None:
        """The lowest share of rows whose every point stays within its tolerance, over the points outputs."""
        return self._lowest("rows_within")

    @property
    def neighbour_recall(self) -> float | None:
        """The lowest recall@10 of the source's nearest neighbours over the embedding outputs."""
        return self._lowest("neighbour_recall")

    @property
    def similarity_rank_corr(self) -> float | None:
        """The lowest rank correlation of pairwise similarities over the embedding outputs."""
        return self._lowest("similarity_rank_corr")
