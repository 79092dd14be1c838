"""One table per model from this working tree's figures, with how the numbers were measured."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from pipeline.core import layout, records
from pipeline.core.config import PARAMS_FILE, Params, load_params
from pipeline.core.errors import PipelineError
from pipeline.core.outcome import Skip
from pipeline.core.records import Records, VariantRecord, load_env
from pipeline.core.registry import BASELINES, ordered


def num(value: Any, fmt: str = ".3g") -> str:
    """A figure for a table cell; empty when there is none."""
    return "" if value is None else format(value, fmt)


def speedup(record: VariantRecord, baseline: VariantRecord | None) -> str:
    """p50 speed-up against `baseline`, measured on the same machine; empty when either is not ok."""
    if baseline is None or not baseline.ok or not record.ok:
        return ""
    return f"{baseline.p50_ms / record.p50_ms:.2f}x"


COLUMNS = (
    "variant", "target", "runtime", "prec", "size MB", "p50 ms", "±95%", "p99 ms", "p50 speed-up",
    "peak samples/s (batch)", "footprint MB", "metric Δ", "decision F1", "top-1 agree", "worst ch err", "worst cos",
    "nn recall@10", "status",
)  # fmt: skip
LEFT = {"machine", "measured on", "variant", "target", "runtime", "prec", "status"}  # left-aligned columns


def _status(record: VariantRecord) -> str:
    marks = ["noisy"] if record.noisy else []
    marks += ["p99 < 1000 calls"] if record.p99_low_confidence else []
    marks += ["in-sample"] if record.in_sample else []
    return f"ok ({', '.join(marks)})" if record.ok and marks else record.status


def peak(record: VariantRecord) -> str:
    """Peak throughput with the batch it was reached at; says so when the sweep was skipped."""
    t = record.throughput_sps
    if t is None and record.out_of_contention:
        return "not measured: out of contention"
    return f"{t.peak:,.0f} (b{t.peak_batch})" if t else ""


def rows(found: Records, order: list[str], baseline_name: str) -> list[list[str]]:
    """One row of COLUMNS per variant that is not skipped, grouped by target, in params.yaml order;
    speed-ups against `baseline_name`. Skipped variants have no numbers: the notes say why."""
    baseline = found.get(baseline_name)

    def place(variant: str) -> tuple[str, int]:
        return found[variant].device, order.index(variant) if variant in order else len(order)

    out = []
    for variant in sorted(found, key=place):
        r = found[variant]
        if r.status == "skipped":
            continue
        latency = r.latency_ms
        out.append([
            variant,
            r.device,
            r.runtime,
            r.precision,
            num(r.size_mb),
            num(latency.p50 if latency else None),
            num(r.p50_ci_pct, ".1f") + ("%" if r.p50_ci_pct is not None else ""),
            num(latency.p99 if latency else None),
            speedup(r, baseline),
            peak(r),
            num(r.footprint_mb, ".0f"),
            num(r.accuracy_delta, "+.4f"),
            num(r.decision_f1, ".4f"),
            num(r.top1_agreement, ".4f"),
            num(r.worst_channel_error, ".3g"),
            num(r.worst_cosine, ".4f"),
            num(r.neighbour_recall, ".4f"),
            _status(r),
        ])  # fmt: skip
    return out


def rich_table(title: str, body: list[list[str]], columns: tuple[str, ...] = COLUMNS) -> Table:
    """The last column is a status: rows not ok are dimmed."""
    table = Table(title=title, title_justify="left", header_style="bold")
    for column in columns:
        table.add_column(column, justify="left" if column in LEFT else "right")
    for row in body:
        ok = row[-1].startswith("ok")
        table.add_row(*row[:-1], row[-1] if ok else f"[yellow]{row[-1]}[/]", style=None if ok else "dim")
    return table


def markdown_table(body: list[list[str]], columns: tuple[str, ...] = COLUMNS) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" if c in LEFT else "---:" for c in columns) + "|"]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in body])


def not_ok_notes(found: Records, not_applicable: dict[str, Skip] | None = None) -> list[str]:
    """One line per distinct (kind, reason), naming its variants: seven GPU variants skipped for
    the same missing driver make one line, not seven. `not_applicable`: the variants with no stages
    for this model (the recorded choice's), listed the same way."""
    grouped: dict[tuple[str, str], list[str]] = {}
    for variant, skip in (not_applicable or {}).items():
        grouped.setdefault((skip.kind.value, skip.reason), []).append(variant)
    for variant, r in found.items():
        if not r.ok and variant not in (not_applicable or {}):
            grouped.setdefault((r.kind.value, r.reason), []).append(variant)
    return [f"{', '.join(names)}: {kind}: {reason}" for (kind, reason), names in grouped.items()]


def short_budget_notes(found: Records) -> list[str]:
    """One line per variant measured on the short budget (out of contention), with the screen's reason:
    why its throughput, concurrent and dim-sweep figures are missing."""
    return [f"{variant}: {r.screen.reason}" for variant, r in sorted(found.items()) if r.out_of_contention and r.screen]


def worst_row_bound(found: Iterable[VariantRecord]) -> str:
    """How many unlabelled rows the worst-row figures rest on, as the benches recorded it beside them
    (EvalRows.bound, the full budget's): what was measured, not what today's params would ask."""
    bounds = {r.eval_rows.bound for r in found if r.eval_rows and r.eval_rows.bound and not r.out_of_contention}
    return " or ".join(map(str, sorted(bounds))) or "fewest"


def how_measured(params: Params, results: Path, found: Iterable[VariantRecord]) -> str:
    """How the figures under `results` (a project root) were measured, in one paragraph; `found`: the
    records it describes."""
    bench = params.bench
    env = load_env(results)
    machine = records.machine_name(results) or results.name
    latency = bench.latency
    return (
        f"Measured on machine {machine}: {env.hardware}, "
        f"{bench.resolved_threads()} intra-op threads, each variant in its own process. "
        f"Latency: batch 1, after >= {bench.warmup.iters} warm-up calls and {bench.warmup.seconds:g} s; "
        f"timed call by call in blocks of ~{latency.block_seconds:g} s until the 95% interval of the p50 "
        f"(order statistics of >= {latency.min_blocks} block medians) is within ±{latency.target_pct:g}%, or for "
        f"{latency.max_seconds:g} s ('noisy' when still wider; ±95% column); p99 flagged below 1000 calls. "
        f"Throughput: one synchronous caller per batch size {bench.throughput.batches}, timed in blocks until "
        f"±{bench.throughput.target_pct:g}% or {bench.throughput.seconds:g} s, stopping at a batch whose gain "
        f"is confirmed below {bench.throughput.min_gain_pct:g}% or when one call takes > "
        f"{bench.throughput.max_call_s:g} s. Footprint: the peak RSS over load and batch-1 latency (the kernel's "
        f"high-water mark) minus the process before loading. "
        + (
            f"A variant whose p50 interval starts above {bench.contention_ratio:g}x the top of the best known one "
            "is out of contention: its latency stops at the minimum blocks and it gets no throughput, concurrent "
            "or dim sweep. "
            if bench.contention_ratio is not None
            else ""
        )
        + "The deployed choice is re-measured side by side with its contenders (deploy/<model>/manifest.json). "
        f"Accuracy Δ and worst-row cosine: vs the FP32 source on the held-out scoring rows (every labelled row; "
        f"unlabelled, the {worst_row_bound(found)} whose worst bounds the rest), at the variant's "
        f"peak-throughput batch, at most {bench.eval_batch}."
    )


def print_summary(
    models: list[str] | None = None,
    root: Path = Path("."),
    markdown: bool = False,
    console: Console | None = None,
) -> None:
    console = console or (Console() if sys.stdout.isatty() else Console(width=200))
    params = load_params(root / PARAMS_FILE)
    results = root
    name = records.machine_name(root)
    if name is None:
        raise PipelineError(f"{layout.env_file(root)}: no figures in this working tree yet: run `dvc repro`")
    order = ordered(params.all_variants)
    measured: list[VariantRecord] = []
    for model in models or params.models:
        found = records.load(model, results)
        if not found:
            console.print(f"{model}: no metrics yet on machine {name} (run `dvc repro`)")
            continue
        measured += found.values()
        baseline = BASELINES[params.model(model).source]
        body = rows(found, order, baseline)
        title = f"{model} on {name} (speed-up against {baseline})"
        choice = records.load_choice(model, results)
        notes = not_ok_notes(found, choice.not_applicable_skips() if choice else {}) + short_budget_notes(found)
        if choice:
            manifest = layout.deploy_dir(model) / layout.MANIFEST
            notes.insert(0, f"deploy: {choice.chosen}" + (
                f" ({choice.runtime}; why: {manifest.as_posix()})" if choice.status == "ok" else f": {choice.reason}"
            ))  # fmt: skip
        if markdown:
            print(f"**{title}**\n\n{markdown_table(body)}\n")
            print("\n".join(f"- {note}" for note in notes) + "\n" if notes else "")
        else:
            console.print(rich_table(title, body))
            for note in notes:
                console.print(f"  {note}", style="dim", markup=False)
            console.print()
    console.print(f"[dim]{how_measured(params, results, measured)}[/]")
