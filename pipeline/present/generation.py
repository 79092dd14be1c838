"""The text-generation part of a model's report: its table and the time-per-token vs size plot.

A decoder's record fills the fields every stage reads (`latency_ms` is its time per output token,
`throughput_sps` tokens/s); this table names them for what they are and adds the generation figures.
"""

from __future__ import annotations

from typing import Any

from pipeline.core.config import Params
from pipeline.core.records import Records

COLUMNS = (
    "variant", "runtime", "prec", "size MB", "TTFT ms", "TPOT p50 ms", "±95%", "TPOT p90 ms", "tokens/s",
    "footprint MB", "at context MB", "ppl Δ%", "top-1 agree", "worst cos", "status",
)  # fmt: skip


def _f(value: float | None, digits: int = 3) -> str:
    return "" if value is None else f"{value:.{digits}g}"


def rows(found: Records, order: list[str]) -> list[list[str]]:
    out = []
    for variant in [v for v in order if v in found and found[v].status != "skipped"]:
        r = found[variant]
        g, ppl, agreement, cosine = r.generation, r.perplexity, r.top1_agreement, r.worst_cosine
        if not r.ok or g is None or ppl is None or r.latency_ms is None or agreement is None or cosine is None:
            out.append([variant, r.runtime, r.precision, *[""] * 11, r.status])
            continue
        ttft = " / ".join(f"{v:.3g}" for v in g.ttft_ms.values())
        tokens = " / ".join(f"{v:,.0f}" for v in g.tokens_per_s.values())
        out.append([
            variant, r.runtime, r.precision, _f(r.size_mb), ttft, _f(r.latency_ms.p50),
            f"{r.p50_ci_pct:.1f}%", _f(r.latency_ms.p90), tokens, f"{r.footprint_mb:.0f}",
            f"{g.context_footprint_mb:.0f}", f"{ppl.increase_pct:+.2f}",
            f"{agreement:.4f}", f"{cosine:.4f}", "ok",
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


def plot_records(found: Records, order: list[str], chosen: str | None) -> list[dict[str, Any]]:
    measured = [v for v in order if v in found and found[v].generation and found[v].perplexity]
    return [
        {"variant": v, "size_mb": found[v].size_mb, "tpot_ms": found[v].p50_ms,
         "ppl_increase_pct": found[v].perplexity.increase_pct, "chosen": v == chosen}  # type: ignore[union-attr]
        for v in measured
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
