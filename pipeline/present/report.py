"""The report stage: one Markdown report per model and an index, with PNG plots, under reports/report/;
and the plot data under reports/plots/ that dvc.yaml declares as plots, so `dvc plots show` and
`dvc plots diff REV` draw the same numbers across revisions.

The report explains the choice (recomputed by pipeline.decide.selection from the same metrics and params
as the select stage) and warns about the traps it can see in the numbers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.core import layout, records
from pipeline.core.config import Params
from pipeline.core.files import atomic_dir, read_json, write_json
from pipeline.core.outcome import Skip
from pipeline.core.records import Kind, Records, VariantRecord, load_env
from pipeline.core.registry import BASELINES, VARIANTS, ordered, should_beat
from pipeline.decide.selection import Candidate, Selection, screen
from pipeline.optimize.applicability import not_applicable
from pipeline.present import generation
from pipeline.present.summary import how_measured, markdown_table, rows, short_budget_notes, speedup

REPORT_DIR = layout.REPORTS / "report"
PLOTS_DIR = layout.REPORTS / "plots"
PLOT_KINDS = ("latency_accuracy", "size", "throughput", "memory", "tpot_size")
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


def traps(found: Records, cpu: dict[str, Any], selection: Selection) -> list[str]:
    """Known traps visible in one model's numbers, one sentence each. Variants that do not apply to
    the model, or were not needed (their kind says so), are a fact, not a warning: the report lists
    them once, apart (not_built)."""
    warnings = []
    if selection.chosen is None:
        warnings.append(f"No variant meets the constraints: {selection.why}. Nothing was deployed.")
    for fp16, fp32 in FP16_PAIRS.items():
        if _ok(found, fp16, fp32) and found[fp16].p50_ms > found[fp32].p50_ms * (1 + _margin(found, fp16, fp32)):
            cause = on_gpu(found[fp16]) or (
                "this CPU has no native FP16 arithmetic (reports/env.json: no AVX512-FP16 or AMX-FP16), so FP16 "
                "only saves size here"
                if not cpu.get("native_fp16")
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
                if not cpu.get("vnni")
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
    stages: applicability.not_applicable), or the variant they would rescue already meets its constraints.
    Facts, not warnings."""
    grouped: dict[str, list[str]] = {}
    for variant, skip in not_applicable.items():
        grouped.setdefault(skip.reason, []).append(f"`{variant}`")
    for variant, r in sorted(found.items()):
        if r.kind in (Kind.NOT_APPLICABLE, Kind.NOT_NEEDED) and variant not in not_applicable:
            grouped.setdefault(r.reason, []).append(f"`{variant}`")
    return [f"{', '.join(names)}: {why}" for why, names in grouped.items()]


def _loss(variant: str, record: VariantRecord, percentile: str) -> float | None:
    loss = Candidate.from_record(variant, record, percentile).loss
    return None if loss == float("inf") else loss


def _quality(record: VariantRecord) -> str:
    """The chosen artifact's quality figure: the task metric's delta, else a grid's worst channel error,
    else the worst output cosine."""
    if record.accuracy_delta is not None:
        return f"{record.accuracy_delta:+.4f}"
    if record.worst_channel_error is not None:
        return f"channel err {record.worst_channel_error:.3g}"
    return f"cos {record.worst_cosine:.4f}" if record.worst_cosine is not None else ""


def scored_rows(found: Records, chosen: str | None) -> str | None:
    """Which rows the quality figures were taken on (the chosen variant's, else the first measured):
    a reader trusts an accuracy only knowing it was not calibrated or tuned on them."""
    measured = [(variant, r.accuracy) for variant, r in found.items() if r.ok and r.accuracy and r.accuracy.eval_origin]
    variant, accuracy = next((m for m in measured if m[0] == chosen), measured[0] if measured else (None, None))
    return accuracy and f"{accuracy.eval_origin}; {accuracy.eval_samples} of them scored for `{variant}`"


JUDGED = {
    "class_scores": "class scores: top-1 agreement (per position over [batch, positions, classes])",
    "embedding": "an embedding (task: embedding): neighbour recall@10 beside the worst row's cosine",
    "channels": "a grid of mixed-scale channels: each channel's worst error against its own peak (max_channel_error)",
    "values": "no task metric applied: judged by the worst row's cosine and relative error; declare `task: "
    "classification` or `task: embedding` in its catalog entry, or give labelled eval data, to judge it by its use",
}


def judged_outputs(found: Records) -> list[str]:
    """How each output was judged (pipeline.core.evaluate.output_kind), from the first measured record."""
    first = next((r for r in found.values() if r.ok and r.outputs), None)
    if first is None:
        return []
    return [f"`{name}`: {JUDGED[block.output_kind]}" for name, block in first.outputs.items() if block.output_kind]


def what_settled_full_precision(found: Records, chosen: str | None, rejected: dict[str, str]) -> list[str]:
    """When a full-precision variant ships, the faster ones measured here and why each lost: FP32 is then
    a conclusion from figures, not a default."""
    if chosen is None or not found[chosen].ok or not found[chosen].precision.startswith("fp32"):
        return []
    mine = found[chosen].p50_ms
    faster = sorted((r.p50_ms, v) for v, r in found.items() if r.ok and v in rejected and r.p50_ms < mine)
    return [f"`{v}` ({mine / p50:.2f}x faster by its own run): {rejected[v]}" for p50, v in faster]


def plot_data(found: Records, selection: Selection, percentile: str) -> dict[str, list[dict[str, Any]]]:
    """The records behind each plot, for DVC (reports/plots/<kind>/<model>.json) and matplotlib."""
    ok = {v: r for v, r in found.items() if r.ok}
    order = [v for v in VARIANTS if v in ok]
    interval = {v: ok[v].p50_ci_ms if percentile == "p50" else None for v in order}
    return {
        "latency_accuracy": [
            {
                "variant": v,
                "latency_ms": ok[v].latency(percentile),
                "latency_low_ms": interval[v].low if interval[v] else None,
                "latency_high_ms": interval[v].high if interval[v] else None,
                "quality_loss": _loss(v, ok[v], percentile),
                "size_mb": ok[v].size_mb,
                "feasible": v in selection.feasible,
                "pareto": v in selection.pareto,
                "chosen": v == selection.chosen,
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
        "tpot_size": generation.plot_records(ok, order, selection.chosen),
    }


def draw(model: str, data: dict[str, list[dict[str, Any]]], percentile: str, folder: Path) -> dict[str, str]:
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


def _draw_tradeoff(axes: Any, plotted: list[dict[str, Any]], percentile: str) -> None:
    """Latency vs quality loss: every variant, the Pareto front of the feasible ones, the choice."""
    for feasible, style in ((False, {"marker": "x", "color": "#999999"}), (True, {"marker": "o", "color": "#4c72b0"})):
        points = [r for r in plotted if r["feasible"] == feasible and r["quality_loss"] is not None]
        spans = [r for r in points if r.get("latency_low_ms") is not None]
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
        ylabel="loss vs FP32 (accuracy drop, else\n1 - worst-output fidelity)",
    )
    from matplotlib import ticker

    # Ticks at 1, 2 and 5 per decade in plain numbers: the default labels every minor tick with an
    # exponent, and they overlapped on a range narrower than a decade.
    axes.xaxis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
    axes.xaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))
    axes.xaxis.set_minor_formatter(ticker.NullFormatter())
    axes.legend(fontsize=7)


def model_report(
    model: str, params: Params, found: Records, cpu: dict[str, Any], folder: Path, root: Path
) -> dict[str, Any]:
    """Write one model's Markdown report and plots into `folder`; return its index row."""
    results = root
    deploy = layout.deploy_dir(model).as_posix()
    config = params.select
    constraints = config.constraints_for(model)
    selection = screen(found, config, constraints)  # the screen: feasibility, Pareto front, rejections
    decided = records.load_choice(model, root)
    if decided:  # the select stage's decision, after its side-by-side re-measure
        selection.chosen, selection.why = decided.chosen if decided.status == "ok" else None, decided.why
        selection.rejected, selection.pareto = decided.rejected, decided.pareto_front
    data = plot_data(found, selection, config.percentile)
    images = draw(model, data, config.percentile, folder)
    warnings = traps(found, cpu, selection)
    baseline = BASELINES[params.model(model).source]
    generates = params.model(model).generates
    example = '--prompt "TEXT"' if generates else "INPUT.npy"
    limits = ", ".join(f"{k} {v}" for k, v in constraints.model_dump().items() if v is not None) or "none"
    lines = [f"# {model}", ""]
    if selection.chosen:
        chosen = found[selection.chosen]
        lines += [
            f"**Deploy `{selection.chosen}`** ({chosen.runtime}, {chosen.precision}): {selection.why}.",
            "",
            f"The artifact is in `{deploy}/` with its `manifest.json`; run it with "
            f"`python -m pipeline predict {deploy} {example}`.",
        ]
    else:
        lines += [f"**Nothing deployed**: {selection.why}."]
    lines += ["", f"Objective: {config.objective} ({config.percentile}). Constraints: {limits}.", ""]
    if held_out := scored_rows(found, selection.chosen):
        lines += [f"Accuracy and fidelity against the FP32 source on held-out rows: {held_out}.", ""]
    if judged := judged_outputs(found):
        lines += ["Each output judged as:", "", *(f"- {line}" for line in judged), ""]
    if warnings:
        lines += ["## Warnings", "", *(f"- {w}" for w in warnings), ""]
    if generates:  # TTFT at each prompt length; tokens/s at each batch size
        table = generation.rows(found, ordered(params.all_variants))
        lines += ["## Variants", "", markdown_table(table, generation.COLUMNS), ""]
    else:
        lines += [
            f"## Variants (speed-up against `{baseline}`)",
            "",
            markdown_table(rows(found, ordered(params.all_variants), baseline)),
            "",
        ]
    if settled := what_settled_full_precision(found, selection.chosen, selection.rejected):
        lines += ["## Why full precision", "", "Each faster variant measured here lost its place:", "",
                  *(f"- {line}" for line in settled), ""]  # fmt: skip
    if selection.rejected:
        lines += ["## Why not the others", "", "| variant | reason |", "|---|---|"]
        lines += [
            f"| {v} | {reason} |" for v, reason in sorted(selection.rejected.items()) if found[v].status != "skipped"
        ]
        lines += [""]
    left_out = not_built(found, not_applicable(params, model))
    if left_out:
        lines += ["## Variants not built for this model", "", *(f"- {line}" for line in left_out), ""]
    short = short_budget_notes(found)
    if short:
        lines += ["## Measured on a short budget (out of contention)", "", *(f"- {line}" for line in short), ""]
    if selection.pareto:
        lines += [
            f"Pareto front over ({config.percentile} latency, quality loss, size): {', '.join(selection.pareto)}.",
            "",
        ]
    titles = {
        "latency_accuracy": "Latency vs quality loss",
        "size": "Size per variant",
        "throughput": "Throughput vs batch size",
        "memory": "Peak memory per variant",
        "tpot_size": "Time per output token vs size",
    }
    lines += where_the_time_goes(model, found, results)
    lines += ["## Plots", ""] + [f"![{titles[kind]}]({path})" for kind, path in images.items()] + [""]
    lines += [f"_{generation.how_measured(params) if generates else how_measured(params, results)}_", ""]
    (folder / f"{model}.md").write_text("\n".join(lines))
    chosen_record = found[selection.chosen] if selection.chosen else None
    return {
        "model": model,
        "source": params.model(model).source,
        "chosen": selection.chosen or "none",
        "p50_ms": f"{chosen_record.p50_ms:.4g}" if chosen_record else "",
        "speedup": speedup(chosen_record, found.get(baseline)) if chosen_record else "",
        "baseline": baseline,
        "delta": _quality(chosen_record) if chosen_record else "",
        "size": f"{chosen_record.size_mb:.3g}" if chosen_record else "",
        "warnings": len(warnings),
        "data": data,
    }


def where_the_time_goes(model: str, found: Records, root: Path, rows_per_variant: int = 5) -> list[str]:
    """One table per runtime: each profiled variant's share of time by operator type (FP32 next to
    its INT8 variants), from reports/profile/. Runtimes name operators differently, hence per runtime."""
    lines: list[str] = []
    by_runtime: dict[str, dict[str, dict[str, Any]]] = {}
    for variant in VARIANTS:
        path = layout.profile_file(model, variant, root)
        if _ok(found, variant) and path.is_file():
            profile = read_json(path)
            if profile.get("top"):
                by_runtime.setdefault(found[variant].runtime, {})[variant] = profile
    for runtime, profiles in by_runtime.items():
        ops: list[str] = []
        for profile in profiles.values():
            ops += [op for op in list(profile["top"])[:rows_per_variant] if op not in ops]
        header = " | ".join(f"`{v}`" for v in profiles)
        lines += [f"**{runtime}**", "", f"| operator type | {header} |", "|---|" + "---:|" * len(profiles)]
        for op in ops:
            cells = []
            for profile in profiles.values():
                entry = profile["top"].get(op)
                cells.append(
                    f"{entry['share_pct']:.0f}% ({entry['total_ms'] / profile['calls']:.3g} ms)" if entry else ""
                )
            lines.append(f"| {op} | " + " | ".join(cells) + " |")
        lines.append("")
    if not lines:
        return []
    return [
        "## Where the time goes",
        "",
        "Share of each variant's profiled time by operator type, and its time per batch-1 call, from the "
        "runtime's own profiler on a separate instance after the timed runs (`reports/profile/`).",
        "",
        *lines,
    ]


def write_reports(params: Params, root: Path = Path(".")) -> dict[str, Any]:
    """The report stage: reports/report/ (Markdown + PNG) and reports/plots/ (data for DVC), from
    the figures measured on this machine."""
    results = root
    env = load_env(results)
    cpu, machine = env.get("cpu", {}), records.machine_name(results) or "?"
    index = []
    with atomic_dir(results / REPORT_DIR) as folder:
        for model in params.models:
            found = records.load(model, results)
            if found:
                index.append(model_report(model, params, found, cpu, folder, root))
        lines = [
            f"# Deployment report: machine {machine}",
            "",
            "| model | source | deploy | p50 ms | speed-up | vs | accuracy Δ / cosine | size MB | warnings |",
            "|---|---|---|---:|---:|---|---:|---:|---:|",
        ]
        lines += [
            f"| [{r['model']}]({r['model']}.md) | {r['source']} | {r['chosen']} | {r['p50_ms']} | {r['speedup']} | "
            f"{r['baseline']} | {r['delta']} | {r['size']} | {r['warnings']} |"
            for r in index
        ]
        lines += ["", f"_{how_measured(params, results)}_", ""]
        (folder / "index.md").write_text("\n".join(lines))
    with atomic_dir(results / PLOTS_DIR) as folder:
        for row in index:
            for kind, plotted in row["data"].items():
                write_json(folder / kind / f"{row['model']}.json", plotted)
    return {"status": "ok", "reason": f"{len(index)} model report(s) in {REPORT_DIR}/index.md"}
