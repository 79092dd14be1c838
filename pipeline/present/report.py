"""The report stage: one Markdown report per model and an index under reports/report/, with the plots
(pipeline.present.plots) and the plot data under reports/plots/.

The report quotes the select stage's recorded choice (reports/selection/<model>.json: the choice, why,
every rejection, the Pareto front, each variant's screen figures) and never screens again; the
warnings and facts beside it come from pipeline.present.diagnosis.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.core import layout, records
from pipeline.core.config import Params
from pipeline.core.errors import PipelineError
from pipeline.core.files import atomic_dir, write_json
from pipeline.core.records import Choice, Records, load_env
from pipeline.core.records import profile as profile_record
from pipeline.core.records.env import Cpu
from pipeline.core.records.profile import Profile
from pipeline.core.records.roofline import Distance, load_distances, load_peaks
from pipeline.core.registry import BASELINES, VARIANTS, ordered
from pipeline.present import generation
from pipeline.present.diagnosis import judged_outputs, not_built, scored_rows, traps, what_settled_full_precision
from pipeline.present.plots import PLOTS_DIR, draw, plot_data
from pipeline.present.summary import (
    SPEEDUP_NOTE,
    contest_speedups,
    how_measured,
    judging_figure,
    markdown_table,
    of_bound,
    rows,
    short_budget_notes,
    speedup,
)

REPORT_DIR = layout.report_dir()


def recorded_choice(model: str, root: Path) -> Choice:
    """The select stage's decision for `model`, which every report line about the choice quotes."""
    decided = records.load_choice(model, root)
    if decided is None:
        path = layout.selection_file(model, root)
        raise PipelineError(f"{path}: no recorded choice for {model}: run the select stage first (`dvc repro`)")
    return decided


def model_report(model: str, params: Params, found: Records, cpu: Cpu, folder: Path, root: Path) -> dict[str, Any]:
    """Write one model's Markdown report and plots into `folder`; return its index row."""
    results = root
    deploy = layout.deploy_dir(model).as_posix()
    config = params.select
    constraints = config.constraints_for(model)
    decided = recorded_choice(model, root)
    chosen_name = decided.chosen if decided.status == "ok" else None
    distances = load_distances(model, root)
    data = plot_data(found, decided, config.percentile, distances)
    images = draw(model, data, config.percentile, folder, load_peaks(root))
    warnings = traps(found, cpu, decided)
    baseline = BASELINES[params.model(model).source]
    generates = params.model(model).generates
    example = '--prompt "TEXT"' if generates else "INPUT.npy"
    limits = ", ".join(f"{k} {v}" for k, v in constraints.model_dump().items() if v is not None) or "none"
    lines = [f"# {model}", ""]
    if chosen_name:
        chosen = found[chosen_name]
        lines += [
            f"**Deploy `{chosen_name}`** ({chosen.runtime}, {chosen.precision}): {decided.why}.",
            "",
            f"The artifact is in `{deploy}/` with its `manifest.json`; run it with "
            f"`python -m pipeline predict {deploy} {example}`.",
        ]
    else:
        lines += [f"**Nothing deployed**: {decided.why}."]
    lines += ["", f"Objective: {config.objective} ({config.percentile}). Constraints: {limits}.", ""]
    if held_out := scored_rows(found, chosen_name):
        lines += [f"Accuracy and fidelity against the FP32 source on held-out rows: {held_out}.", ""]
    if judged := judged_outputs(found, constraints.metric_decides):
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
            markdown_table(rows(found, ordered(params.all_variants), baseline, distances=distances,
                                side_by_side=contest_speedups(decided, baseline))),
            "",
            SPEEDUP_NOTE.format(baseline=f"`{baseline}`") + ".",
            "",
        ]  # fmt: skip
    lines += how_far(distances, chosen_name)
    if settled := what_settled_full_precision(found, chosen_name, decided.rejected):
        lines += ["## Why full precision", "", "Each faster variant measured here lost its place:", "",
                  *(f"- {line}" for line in settled), ""]  # fmt: skip
    if decided.rejected:
        lines += ["## Why not the others", "", "| variant | reason |", "|---|---|"]
        lines += [
            f"| {v} | {reason} |" for v, reason in sorted(decided.rejected.items()) if found[v].status != "skipped"
        ]
        lines += [""]
    left_out = not_built(found, decided.not_applicable_skips())
    if left_out:
        lines += ["## Variants not built for this model", "", *(f"- {line}" for line in left_out), ""]
    short = short_budget_notes(found)
    if short:
        lines += ["## Measured on a short budget (out of contention)", "", *(f"- {line}" for line in short), ""]
    if decided.pareto_front:
        lines += [
            f"Pareto front over ({config.percentile} latency, quality loss, size): {', '.join(decided.pareto_front)}.",
            "",
        ]
    titles = {
        "latency_accuracy": "Latency vs quality loss",
        "size": "Size per variant",
        "throughput": "Throughput vs batch size",
        "memory": "Peak memory per variant",
        "tpot_size": "Time per output token vs size",
        "roofline": "Roofline: every variant under this machine's measured roofs",
    }
    lines += where_the_time_goes(model, found, results)
    lines += ["## Plots", ""] + [f"![{titles[kind]}]({path})" for kind, path in images.items()] + [""]
    measured = generation.how_measured(params) if generates else how_measured(params, results, found.values())
    lines += [f"_{measured}_", ""]
    (folder / f"{model}.md").write_text("\n".join(lines))
    chosen_record = found[chosen_name] if chosen_name else None
    return {
        "model": model,
        "source": params.model(model).source,
        "chosen": chosen_name or "none",
        "p50_ms": f"{chosen_record.p50_ms:.4g}" if chosen_record else "",
        "speedup": speedup(chosen_record, found.get(baseline), contest_speedups(decided, baseline).get(chosen_name))
        if chosen_record and chosen_name
        else "",
        "baseline": baseline,
        "delta": judging_figure(chosen_record) if chosen_record else "",
        "size": f"{chosen_record.size_mb:.3g}" if chosen_record else "",
        "of_bound": of_bound(distances.get(chosen_name or "")),
        "warnings": len(warnings),
        "data": data,
    }


def how_far(distances: dict[str, Distance], chosen: str | None) -> list[str]:
    """How far each variant is from this machine's limit (pipeline.decide.roofline): a table, the choice's sentence."""
    counted = {v: d for v, d in distances.items() if d.status == "ok"}
    if not counted:
        reasons = sorted({d.reason for d in distances.values() if d.status == "not counted"})
        return ["## How far from the limit", "", f"Not counted: {'; '.join(reasons)}.", ""] if reasons else []
    lines = ["## How far from the limit", ""]
    if chosen in counted:
        lines += [f"`{chosen}` {counted[chosen].why}.", ""]
    lines += [
        "| variant | roof | MMACs | intensity (MAC/B) | GMAC/s b1 | of bound b1 | bound by | of bound at peak batch |",
        "|---|---|---:|---:|---:|---:|---|---:|",
    ]
    for v, d in counted.items():
        at_peak = f"{d.of_bound_peak:.0%} (b{d.peak_batch}, {d.bound_by_peak})" if d.of_bound_peak is not None else ""
        lines.append(
            f"| {v} | {d.roof_precision} | {d.macs / 1e6:.3g} | {d.intensity:.3g} | {d.achieved_gmacs:.3g} | "
            f"{d.of_bound:.0%} | {d.bound_by} | {at_peak} |"
        )
    return [*lines, ""]


def where_the_time_goes(model: str, found: Records, root: Path, rows_per_variant: int = 5) -> list[str]:
    """One table per runtime: each profiled variant's share of time by operator type (FP32 next to
    its INT8 variants), from reports/profile/. Runtimes name operators differently, hence per runtime."""
    lines: list[str] = []
    by_runtime: dict[str, dict[str, Profile]] = {}
    for variant in VARIANTS:
        profile = profile_record.load(model, variant, root) if variant in found and found[variant].ok else None
        if profile and profile.top:
            by_runtime.setdefault(found[variant].runtime, {})[variant] = profile
    for runtime, profiles in by_runtime.items():
        ops: list[str] = []
        for profile in profiles.values():
            ops += [op for op in list(profile.top)[:rows_per_variant] if op not in ops]
        header = " | ".join(f"`{v}`" for v in profiles)
        lines += [f"**{runtime}**", "", f"| operator type | {header} |", "|---|" + "---:|" * len(profiles)]
        for op in ops:
            cells = []
            for profile in profiles.values():
                entry, calls = profile.top.get(op), profile.calls or 1
                cells.append(f"{entry.share_pct:.0f}% ({entry.total_ms / calls:.3g} ms)" if entry else "")
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
    cpu, machine = env.cpu, env.machine_name or "?"
    index, measured = [], []
    with atomic_dir(results / REPORT_DIR) as folder:
        for model in params.models:
            found = records.load(model, results)
            if found:
                index.append(model_report(model, params, found, cpu, folder, root))
                measured += found.values()
        lines = [
            f"# Deployment report: machine {machine}",
            "",
            "| model | source | deploy | p50 ms | speed-up | vs | accuracy Δ / cosine | size MB | of bound "
            "| warnings |",
            "|---|---|---|---:|---:|---|---:|---:|---:|---:|",
        ]
        lines += [
            f"| [{r['model']}]({r['model']}.md) | {r['source']} | {r['chosen']} | {r['p50_ms']} | {r['speedup']} | "
            f"{r['baseline']} | {r['delta']} | {r['size']} | {r['of_bound']} | {r['warnings']} |"
            for r in index
        ]
        lines += ["", f"_{how_measured(params, results, measured)}_", ""]
        (folder / "index.md").write_text("\n".join(lines))
    with atomic_dir(results / PLOTS_DIR) as folder:
        for row in index:
            for kind, plotted in row["data"].items():
                write_json(folder / kind / f"{row['model']}.json", plotted)
    return {"status": "ok", "reason": f"{len(index)} model report(s) in {REPORT_DIR}/index.md"}
