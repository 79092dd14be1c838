"""The text-generation part of a model's report: its table and the time-per-token vs size plot.

A decoder's record keeps the keys every stage reads (`latency_ms` is its time per output token,
`throughput_sps` tokens/s); this table names them for what they are and adds the generation figures.
"""

from __future__ import annotations

from typing import Any

from pipeline.core.config import Params

COLUMNS = (
    "variant", "runtime", "prec", "size MB", "TTFT ms", "TPOT p50 ms", "±95%", "TPOT p90 ms", "tokens/s",
    "footprint MB", "at context MB", "ppl Δ%", "top-1 agree", "worst cos", "status",
)  # fmt: skip


def _f(value: float | None, digits: int = 3) -> str:
    return "" if value is None else f"{value:.{digits}g}"


def rows(metrics: dict[str, dict[str, Any]], order: list[str]) -> list[list[str]]:
    out = []
    for variant in [v for v in order if v in metrics and metrics[v].get("status") != "skipped"]:
        m = metrics[variant]
        if m["status"] != "ok":
            out.append([variant, m.get("runtime", ""), m.get("precision", ""), *[""] * 11, m["status"]])
            continue
        g, logits = m["generation"], m["fidelity"]["logits"]
        ttft = " / ".join(f"{v:.3g}" for v in g["ttft_ms"].values())
        tokens = " / ".join(f"{v:,.0f}" for v in g["tokens_per_s"].values())
        out.append([
            variant, m["runtime"], m["precision"], _f(m["size_mb"]), ttft, _f(m["latency_ms"]["p50"]),
            f"{m['p50_ci_pct']:.1f}%", _f(m["latency_ms"]["p90"]), tokens, f"{m['footprint_mb']:.0f}",
            f"{g['context_footprint_mb']:.0f}", f"{m['perplexity']['increase_pct']:+.2f}",
            f"{logits['top1_agreement']:.4f}", f"{logits['cosine_min']:.4f}", "ok",
        ])  # fmt: skip
    return out


def how_measured(params: Params) -> str:
    g = params.bench.generation
    return (
        f"Text generation: greedy decoding of exactly {g.new_tokens} tokens, {g.repeats} runs per figure, each "
        f"from other held-out rows, after one untimed run, every runtime timed token by token on the same "
        f"clock. TTFT (prompt in, first token out) at prompts of {' / '.join(map(str, g.prompt_lengths))} tokens "
        f"(median); TPOT: every token after the first at batch 1, prompt {g.prompt_lengths[0]} (p50 with its "
        f"95% order-statistic interval, p90); tokens/s at batch {' / '.join(map(str, g.batches))}: generated "
        f"tokens over the median decode time. Footprint: peak RSS over load and generation minus the bare "
        f"process; at context: while one sequence grows to {g.context} tokens (KV cache included). Quality on "
        f"{g.quality_rows} held-out windows: perplexity vs the FP32 source's, next-token agreement at every "
        f"position, the worst row's mean logit cosine."
    )


def plot_records(metrics: dict[str, dict[str, Any]], order: list[str], chosen: str | None) -> list[dict[str, Any]]:
    return [
        {"variant": v, "size_mb": metrics[v]["size_mb"], "tpot_ms": metrics[v]["latency_ms"]["p50"],
         "ppl_increase_pct": metrics[v]["perplexity"]["increase_pct"], "chosen": v == chosen}
        for v in order if metrics.get(v, {}).get("status") == "ok" and "generation" in metrics[v]
    ]  # fmt: skip


def draw(axes: Any, records: list[dict[str, Any]]) -> None:
    """Each variant at (size, TPOT), numbered by size; the legend names them with their perplexity
    change (labels beside the points collide when variants sit close); the chosen one large and red."""
    from matplotlib.ticker import FormatStrFormatter, LogLocator

    for number, r in enumerate(sorted(records, key=lambda r: r["size_mb"]), 1):
        axes.scatter(
            r["size_mb"], r["tpot_ms"], s=90 if r["chosen"] else 30, color="#c44e52" if r["chosen"] else "#4c72b0",
            label=f"{number}: {r['variant']} ({r['ppl_increase_pct']:+.1f}% ppl)",
        )  # fmt: skip
        axes.annotate(str(number), (r["size_mb"], r["tpot_ms"]), fontsize=7, xytext=(5, 3), textcoords="offset points")
    axes.set(xscale="log", yscale="log", xlabel="artifact size (MB)", ylabel="time per output token, p50 (ms)")
    for axis in (axes.xaxis, axes.yaxis):
        axis.set_minor_locator(LogLocator(base=10, subs=(2, 3, 5)))
        axis.set_major_formatter(FormatStrFormatter("%g"))
        axis.set_minor_formatter(FormatStrFormatter("%g"))
    axes.tick_params(which="minor", labelsize=7)
    axes.margins(x=0.1, y=0.15)
    axes.legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(1.01, 1), borderaxespad=0, frameon=False)
