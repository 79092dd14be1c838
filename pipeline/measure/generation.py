"""The benchmark of a text-generation variant, run in a fresh process like every other (worker.measure
hands over when the model's task is text-generation).

Order: import and load (load_ms, the footprint's start), one untimed generation (warm-up), then for
each prompt length `repeats` greedy generations of `new_tokens` at batch 1 (time to first token; the
per-token times of every run at the first length pooled into the time per output token), each batch
size's tokens per second, the peak footprint while one sequence grows to `context` tokens, and last
the quality pass on the held-out windows (never inside a memory or time figure).

The record keeps the keys every stage reads: `latency_ms` is the time per output token at batch 1,
`throughput_sps` tokens per second, `fidelity.logits` the logit cosine and next-token agreement
with the FP32 source, and `perplexity` the increase the select stage limits.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.core.config import GenerationBench
from pipeline.core.memory import RssSampler
from pipeline.core.records import Generation, LatencyStats, Measured, RuntimeSettings, Throughput
from pipeline.core.records import source as source_record
from pipeline.core.stats import median_interval
from pipeline.measure.loading import load_variant
from pipeline.runtimes.generator import Generator


def prompts(reference: np.ndarray, length: int, batch: int, first_row: int = 0) -> np.ndarray:
    """`batch` prompts of `length` held-out tokens from `first_row` on (rows wrap around)."""
    rows = (first_row + np.arange(batch)) % len(reference)
    window = reference.shape[1]
    if length > window:  # longer than the stored windows: consecutive rows joined
        joined = reference.reshape(-1)
        return np.stack([np.resize(np.roll(joined, -r * window), length) for r in rows]).astype(np.int64)
    return np.ascontiguousarray(reference[rows, :length], dtype=np.int64)


def require_context(length: int, context: int | None, what: str) -> None:
    if context and length > context:
        raise ValueError(f"{what}: {length} tokens exceed the model's context of {context} (max_position_embeddings)")


def timed_runs(
    generator: Generator, ids: np.ndarray, length: int, batch: int, settings: GenerationBench
) -> dict[str, Any]:
    """`settings.repeats` generations, each from other held-out rows: no runtime times a cache hit."""
    first, steps, decode_s = [], [], []
    for repeat in range(settings.repeats):
        prompt = prompts(ids, length, batch, first_row=repeat * batch)
        start = time.perf_counter()
        run = generator.generate(prompt, settings.new_tokens)
        total = time.perf_counter() - start
        first.append(run.first_s)
        steps += run.step_s
        decode_s.append(max(total - run.first_s, 1e-9))
    return {"first_s": first, "step_s": steps, "decode_s": decode_s}


def quality(generator: Generator, reference: dict[str, np.ndarray], ids: np.ndarray) -> dict[str, Any]:
    """Perplexity on the held-out windows, next-token agreement with the source at every position,
    and the logit cosine per position (worst row: the row whose mean cosine is lowest)."""
    logprob, agree, cosines = [], [], []
    for i, row in enumerate(ids):
        logits = generator.logits(row).astype(np.float64)
        shifted = logits[:-1] - logits[:-1].max(-1, keepdims=True)
        log_softmax = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
        logprob.append(log_softmax[np.arange(len(row) - 1), row[1:]])
        agree.append(logits.argmax(-1) == reference["top1"][i])
        if i < len(reference["logits"]):
            want = reference["logits"][i].astype(np.float64)
            dot = (logits * want).sum(-1)
            cosines.append(float(np.mean(dot / (np.linalg.norm(logits, axis=-1) * np.linalg.norm(want, axis=-1)))))
    source_ppl = float(np.exp(-reference["logprob"][: len(ids)].mean()))
    variant_ppl = float(np.exp(-np.mean(logprob)))
    agreement = float(np.mean(agree))
    return {
        "perplexity": {
            "source": source_ppl,
            "variant": variant_ppl,
            "increase_pct": 100 * (variant_ppl / source_ppl - 1),
            "rows": len(ids),
            "tokens": int(sum(len(r) for r in logprob)),
        },
        "fidelity": {
            "logits": {
                "cosine_min": min(cosines),
                "cosine_mean": float(np.mean(cosines)),
                "top1_agreement": agreement,
                "top1_agreement_min": float(min(a.mean() for a in agree)),
                "rows": len(cosines),
            }
        },
    }


def measure(model: str, artifact: str, root: str = ".") -> dict[str, Any]:
    base = Path(root)
    family = source_record.load(model, base).family
    context = family.context
    with RssSampler() as sampler:
        baseline_mb = sampler.now_mb()
        loaded = load_variant(model, Path(artifact), base, sampler)
        generator: Generator = loaded.session  # type: ignore[assignment]
        settings: GenerationBench = loaded.params.bench.generation
        ids = loaded.reference.inputs["input_ids"]
        for length in settings.prompt_lengths:
            require_context(length + settings.new_tokens, context, "bench.generation.prompt_lengths")
        require_context(settings.context, context, "bench.generation.context")

        with sampler.phase("generate"):
            start = time.perf_counter()
            generator.generate(prompts(ids, settings.prompt_lengths[0], 1), settings.new_tokens)
            first_generation_ms = 1000 * (time.perf_counter() - start)
            by_length = {n: timed_runs(generator, ids, n, 1, settings) for n in settings.prompt_lengths}
        by_batch = {b: timed_runs(generator, ids, settings.prompt_lengths[0], b, settings) for b in settings.batches}
        with sampler.phase("context"):
            prompt_length = settings.prompt_lengths[0]
            generator.generate(prompts(ids, prompt_length, 1), settings.context - prompt_length)
        runtime_settings = RuntimeSettings.model_validate(generator.details())
        scored = quality(generator, loaded.reference.outputs, ids)

    steps = by_length[settings.prompt_lengths[0]]["step_s"]
    tpot = LatencyStats.from_ns(np.array(steps) * 1e9)
    tokens_per_s = {
        f"b{b}": b * (settings.new_tokens - 1) / float(np.median(run["decode_s"])) for b, run in by_batch.items()
    }
    peak_key = max(tokens_per_s, key=tokens_per_s.__getitem__)
    peak_rss = max(sampler.peaks["load"], sampler.peaks["generate"])
    kv_bytes_per_token = 2 * (family.layers or 0) * (family.kv_heads or 0) * (family.head_dim or 0) * 4
    interval = median_interval([1000 * s for s in steps], tpot.p50)
    measured = Measured(
        load_ms=loaded.load_ms,
        first_infer_ms=first_generation_ms,
        latency_ms=tpot,
        latency_is="time per output token (batch 1, greedy)",
        p50_ci_ms={"low": interval.low, "high": interval.high, "blocks": interval.blocks},
        p50_ci_pct=interval.half_width_pct,
        noisy=interval.half_width_pct > loaded.params.bench.latency.target_pct,
        throughput_sps=Throughput(
            peak=tokens_per_s[peak_key],
            peak_batch=int(peak_key[1:]),
            by_batch=tokens_per_s,
            stopped_by="all batch sizes measured",
            unit="generated tokens / s (decode, after the first token)",
        ),
        peak_rss_mb=peak_rss,
        footprint_mb=peak_rss - baseline_mb,
        generation=Generation(
            ttft_ms={f"p{n}": 1000 * float(np.median(r["first_s"])) for n, r in by_length.items()},
            tpot_ms={"p50": tpot.p50, "p90": tpot.p90, "mean": tpot.mean, "n": tpot.n},
            tokens_per_s=tokens_per_s,
            context_tokens=settings.context,
            context_footprint_mb=sampler.peaks["context"] - baseline_mb,
            kv_cache_mb_fp32=kv_bytes_per_token * settings.context / 1e6,
            how=(
                f"greedy decoding of {settings.new_tokens} tokens, {settings.repeats} runs per prompt length "
                f"{settings.prompt_lengths} and per batch {settings.batches} after one untimed run; TTFT: "
                f"median over the runs; TPOT: every token after the first at batch 1, prompt "
                f"{settings.prompt_lengths[0]} ({tpot.n} tokens); tokens/s: batch x {settings.new_tokens - 1} "
                f"/ the median decode time; context footprint: peak RSS over the bare process while one "
                f"sequence grows to {settings.context} tokens ({sampler.how})"
            ),
        ),
        **scored,
        **({"inference_precision": executed} if (executed := runtime_settings.inference_precision) else {}),
        import_ms=loaded.import_ms,
        runtime_rss_mb=loaded.runtime_rss_mb,
        baseline_rss_mb=baseline_mb,
        memory_how=sampler.how,
        runtime_settings=runtime_settings,
        eval_origin=loaded.reference.origin,
    )
    return {
        "measured": measured.model_dump(mode="json", exclude_unset=True),
        "profile": {"reason": "no operator profile for generation variants"},
    }
