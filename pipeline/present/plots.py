"""The report's plots: the data behind each (reports/plots/<kind>/<model>.json, which dvc.yaml declares
as plots, so `dvc plots show` and `dvc plots diff REV` draw the same numbers across revisions) and
its PNG drawn with matplotlib. Feasibility, the Pareto front, the choice and each variant's quality
loss come from the stored choice (reports/selection), not from screening again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.core import layout
from pipeline.core.records import Choice, Records
from pipeline.core.records.roofline import Distance, Peaks
from pipeline.core.registry import VARIANTS
from pipeline.present import generation

PLOTS_DIR = layout.plots_dir()
PLOT_KINDS = ("latency_accuracy", "size", "throughput", "memory", "tpot_size", "roofline")


def plot_data(
    found: Records, choice: Choice, percentile: str, distances: dict[str, Distance] | None = None
) -> dict[str, list[dict[str, Any]]]:
    """The records behind each plot, for DVC (reports/plots/<kind>/<model>.json) and matplotlib."""
    ok = {v: r for v, r in found.items() if r.ok}
    order = [v for v in VARIANTS if v in ok]
    interval = {v: ok[v].p50_ci_ms if percentile == "p50" else None for v in order}
    loss = {v: figures.loss for v, figures in choice.figures.items()}
    feasible = {v for v, figures in choice.figures.items() if figures.feasible}
    chosen = choice.chosen if choice.status == "ok" else None
    return {
        "latency_accuracy": [
            {
                "variant": v,
                "latency_ms": ok[v].latency(percentile),
                "latency_low_ms": interval[v].low if interval[v] else None,
                "latency_high_ms": interval[v].high if interval[v] else None,
                "quality_loss": loss.get(v),
                "size_mb": ok[v].size_mb,
                "feasible": v in feasible,
                "pareto": v in choice.pareto_front,
                "chosen": v == chosen,
            }
            for v in order
        ],
        "size": [{"variant": v, "size_mb": ok[v].size_mb} for v in order],
        "throughput": [
            {"variant": v, "batch": int(key[1:]), "samples_per_s": value}
            for v in order
            for key, value in (ok[v].throughput_sps.by_batch if ok[v].throughput_sps else {}).items()
        ],
        "memory": [{"variant": v, "footprint_mb": ok[v].footprint_mb} for v in order],
        "tpot_size": generation.plot_records(ok, order, chosen),
        "roofline": [
            {"variant": v, "batch": batch, "intensity": x, "gmacs": y, "roof": d.roof_precision, "chosen": v == chosen}
            for v, d in (distances or {}).items()
            if d.status == "ok"
            for batch, x, y in (
                (1, d.intensity, d.achieved_gmacs),
                (d.peak_batch, d.intensity_peak, d.achieved_gmacs_peak),
            )
            if x is not None and y is not None
        ],
    }


def draw(
    model: str, data: dict[str, list[dict[str, Any]]], percentile: str, folder: Path, peaks: Peaks | None = None
) -> dict[str, str]:
    """PNG plots (matplotlib, Agg) in folder/img/<model>/ (images only: dvc.yaml declares that folder as
    image plots); returns kind -> path relative to `folder`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    (folder / "img" / model).mkdir(parents=True, exist_ok=True)
    files = {}
    for kind in PLOT_KINDS:
        plotted = data[kind]
        if not plotted:
            continue
        figure, axes = plt.subplots(figsize=(7, 4.2), dpi=110)
        if kind == "latency_accuracy":
            _draw_tradeoff(axes, plotted, percentile)
        elif kind == "tpot_size":
            generation.draw(axes, plotted)
        elif kind == "roofline":
            _draw_roofline(axes, plotted, peaks)
        elif kind == "throughput":
            colors = plt.get_cmap("tab20").colors  # more variants than tab10 has colours
            for index, variant in enumerate(dict.fromkeys(r["variant"] for r in plotted)):
                points = [(r["batch"], r["samples_per_s"]) for r in plotted if r["variant"] == variant]
                axes.plot(*zip(*points, strict=True), marker="o", label=variant, color=colors[index % len(colors)])
            axes.set(xscale="log", yscale="log", xlabel="batch size", ylabel="samples / s")
            axes.set_xticks([r["batch"] for r in plotted], labels=[str(r["batch"]) for r in plotted])
            axes.legend(fontsize=7, ncol=2)
        else:
            value = {"size": "size_mb", "memory": "footprint_mb"}[kind]
            axes.barh([r["variant"] for r in plotted], [r[value] for r in plotted], color="#4c72b0")
            axes.set_xlabel({"size": "artifact size (MB)", "memory": "footprint: the runtime's peak RSS (MB)"}[kind])
            axes.invert_yaxis()
        axes.set_title(f"{model}: {kind.replace('_', ' vs ')}", fontsize=10)
        axes.grid(alpha=0.3)
        figure.tight_layout()
        name = f"img/{model}/{kind}.png"
        figure.savefig(folder / name, metadata={"Software": None})  # no version stamp: same data, same bytes
        plt.close(figure)
        files[kind] = name
    return files


def _draw_roofline(axes: Any, plotted: list[dict[str, Any]], peaks: Peaks | None) -> None:
    """Every variant at batch 1 (o) and its peak-throughput batch (^), under this machine's measured roofs:
    one flat line per precision's MAC rate, one slope per working set's read bandwidth."""
    import matplotlib.pyplot as plt
    from matplotlib import ticker

    xs = [r["intensity"] for r in plotted]
    span = (min(xs) / 3, max(xs) * 3)
    colors = dict(zip(("fp32", "bf16", "fp16", "int8"), ("#4c72b0", "#55a868", "#8172b2", "#c44e52"), strict=True))
    for precision in colors:
        if peaks and (roof := peaks.roof(precision)):
            axes.plot(
                span, [roof[0]] * 2, color=colors[precision], lw=1.2, label=f"{precision.upper()} roof ({roof[1]})"
            )
    dashes = ("--", ":", "-.")  # one per working set, named in the legend (labels on the slopes overlapped)
    for index, (size, rate) in enumerate((peaks.read_gbs if peaks else {}).items()):
        label = f"read {rate.center:.0f} GB/s ({size} MB set)"
        axes.plot(span, [rate.center * x for x in span], color="#888888", lw=0.8, ls=dashes[index % 3], label=label)
    palette = plt.get_cmap("tab20").colors
    for index, variant in enumerate(dict.fromkeys(r["variant"] for r in plotted)):
        for r in (r for r in plotted if r["variant"] == variant):
            marker = "*" if r["chosen"] and r["batch"] == 1 else ("o" if r["batch"] == 1 else "^")
            label, color = variant if r["batch"] == 1 else None, palette[index % len(palette)]
            size = 120 if marker == "*" else 28
            axes.scatter([r["intensity"]], [r["gmacs"]], marker=marker, s=size, color=color, label=label, zorder=4)
    top = max([r["gmacs"] for r in plotted] + [rate[0] for p in colors if peaks and (rate := peaks.roof(p))])
    axes.set(xscale="log", yscale="log", xlabel="intensity (MACs per byte moved; ^: peak-throughput batch)",
             ylabel="GMAC/s achieved", ylim=(min(r["gmacs"] for r in plotted) / 2, top * 2))  # fmt: skip
    for axis in (axes.xaxis, axes.yaxis):
        axis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
        axis.set_major_formatter(ticker.FormatStrFormatter("%g"))
        axis.set_minor_formatter(ticker.NullFormatter())
    axes.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside: roofs, slopes, variants


def _draw_tradeoff(axes: Any, plotted: list[dict[str, Any]], percentile: str) -> None:
    """Latency vs quality loss: every variant, the Pareto front of the feasible ones, the choice."""
    for feasible, style in ((False, {"marker": "x", "color": "#999999"}), (True, {"marker": "o", "color": "#4c72b0"})):
        points = [r for r in plotted if r["feasible"] == feasible and r["quality_loss"] is not None]
        spans = [r for r in points if r["latency_low_ms"] is not None]
        if spans:  # the p50's 95% interval
            axes.errorbar(
                [r["latency_ms"] for r in spans],
                [r["quality_loss"] for r in spans],
                xerr=[
                    [r["latency_ms"] - r["latency_low_ms"] for r in spans],
                    [r["latency_high_ms"] - r["latency_ms"] for r in spans],
                ],
                fmt="none",
                ecolor=style["color"],
                elinewidth=1,
                capsize=2,
            )
        if points:
            axes.scatter(
                [r["latency_ms"] for r in points],
                [r["quality_loss"] for r in points],
                label="meets constraints" if feasible else "rejected",
                **style,
            )
    front = sorted((r for r in plotted if r["pareto"] and r["quality_loss"] is not None), key=lambda r: r["latency_ms"])
    if front:
        axes.step(
            [r["latency_ms"] for r in front],
            [r["quality_loss"] for r in front],
            where="post",
            color="#dd8452",
            label="Pareto front",
        )
    labelled = sorted((r for r in plotted if r["quality_loss"] is not None), key=lambda r: r["latency_ms"])
    for rank, r in enumerate(labelled):  # staggered heights: variants often share a loss
        axes.annotate(
            r["variant"],
            (r["latency_ms"], r["quality_loss"]),
            fontsize=6,
            alpha=0.85,
            xytext=(3, 4 + 8 * (rank % 4)),
            textcoords="offset points",
            arrowprops={"arrowstyle": "-", "alpha": 0.3, "lw": 0.5},
        )
        if r["chosen"]:
            axes.scatter(
                [r["latency_ms"]],
                [r["quality_loss"]],
                marker="*",
                s=220,
                color="#c44e52",
                zorder=5,
                label=f"chosen: {r['variant']}",
            )
    axes.margins(y=0.25)  # room for the labels above the top points
    axes.set(
        xscale="log",
        xlabel=f"latency {percentile} (ms, batch 1; bars: 95% interval)",
        ylabel="loss vs FP32 (task metric drop, else\n1 - worst-output decision score)",
    )
    from matplotlib import ticker

    # Ticks at 1, 2 and 5 per decade in plain numbers: the default labels every minor tick with an
    # exponent, and they overlapped on a range narrower than a decade.
    axes.xaxis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
    axes.xaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))
    axes.xaxis.set_minor_formatter(ticker.NullFormatter())
    axes.legend(fontsize=7)
