"""One table per model from this working tree's figures: by default the columns a choice is read from,
fitted to the terminal; with --wide (or --md) every column and how the numbers were measured."""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rich.box import HEAVY_HEAD
from rich.console import Console
from rich.table import Table

from pipeline.core import layout, records
from pipeline.core.config import PARAMS_FILE, Params, load_params
from pipeline.core.errors import PipelineError
from pipeline.core.outcome import Skip
from pipeline.core.records import Choice, Records, VariantRecord, load_env
from pipeline.core.records.choice import SpeedUp
from pipeline.core.records.roofline import Distance, load_distances
from pipeline.core.registry import BASELINES, ordered


def num(value: Any, fmt: str = ".3g") -> str:
    """A figure for a table cell; empty when there is none."""
    return "" if value is None else format(value, fmt)


def speedup(record: VariantRecord, baseline: VariantRecord | None, side_by_side: SpeedUp | None = None) -> str:
    """p50 speed-up against `baseline`, one figure per variant, saying which measurement it is: a contest
    contender's ratio timed beside the baseline with its 95% interval ("2.41x ±1.3%"), else the stored bench
    figures' ratio, taken minutes apart ("~2.41x", SPEEDUP_NOTE); empty when either is not ok."""
    if side_by_side is not None:
        high, low = side_by_side.high, side_by_side.low
        half = 100 * ((high / low) ** 0.5 - 1) if high is not None and low > 0 else float("inf")
        return f"{side_by_side.ratio:.2f}x ±{half:.1f}%"
    if baseline is None or not baseline.ok or not record.ok:
        return ""
    return f"~{baseline.p50_ms / record.p50_ms:.2f}x"


SPEEDUP_NOTE = (
    "speed-up: 'Nx ±p%' timed side by side with {baseline} in the select stage's contest (each in its own "
    "process, 95% interval); '~Nx' the ratio of stored bench figures, taken minutes apart"
)


COLUMNS = (
    "variant", "target", "runtime", "prec", "size MB", "p50 ms", "±95%", "p99 ms", "p50 speed-up",
    "peak samples/s (batch)", "footprint MB", "metric Δ", "decision F1", "top-1 agree", "worst ch err", "worst cos",
    "nn recall@10", "of bound", "status",
)  # fmt: skip  # --wide (and --md): every figure
# the default: the columns a choice is read from, which fit a terminal
BRIEF = ("variant", "prec", "p50 ms ±95%", "speed-up", "Δ / fidelity", "of bound", "status")
LEFT = {"machine", "measured on", "variant", "target", "runtime", "prec", "status"}  # left-aligned columns
WIDE = 220  # --wide prints at least this wide, whatever the terminal (pipe it to `less -S`)
NAMES = 3  # the default names at most this many variants in a note
WIDE_HINT = "--wide: every column, every note in full, and how the figures were measured"


MARKS = {  # a status mark, and what it says when every measured row of a model has it (said once, under the table)
    "noisy": "every variant's p50 interval stayed wider than its target (noisy)",
    "p99 < 1000 calls": "every variant's p99 is read from fewer than 1000 calls: a rough figure",
    "in-sample": "every variant was scored on rows it was calibrated on (in-sample)",
}


def marks(record: VariantRecord) -> list[str]:
    """What qualifies an ok record's figures (MARKS' keys)."""
    found = ["noisy"] if record.noisy else []
    found += ["p99 < 1000 calls"] if record.p99_low_confidence else []
    return found + (["in-sample"] if record.in_sample else [])


def shared_marks(found: Records) -> list[str]:
    """The marks every ok record of a model carries (two or more of them): said once, not in each row."""
    measured = [record for record in found.values() if record.ok]
    if len(measured) < 2:
        return []
    return [mark for mark in MARKS if all(mark in marks(record) for record in measured)]


def _status(record: VariantRecord, shared: list[str] | tuple[str, ...] = ()) -> str:
    own = [mark for mark in marks(record) if mark not in shared]
    return f"ok ({', '.join(own)})" if record.ok and own else record.status


def peak(record: VariantRecord) -> str:
    """Peak throughput with the batch it was reached at; says so when the sweep was skipped."""
    t = record.throughput_sps
    if t is None and record.out_of_contention:
        return "not measured: out of contention"
    return f"{t.peak:,.0f} (b{t.peak_batch})" if t else ""


def judging_figure(record: VariantRecord) -> str:
    """The quality figure a variant is judged by: the task metric's delta, else its decisions kept (the
    worst output's decision F1, then top-1 agreement, then the rows whose points stayed), else a grid's worst
    channel error, else the worst cosine."""
    if record.accuracy_delta is not None:
        return f"{record.accuracy_delta:+.4f}"
    if record.decision_f1 is not None:
        return f"F1 {record.decision_f1:.4f}"
    if record.top1_agreement is not None:
        return f"top-1 {record.top1_agreement:.4f}"
    if record.rows_within is not None:
        return f"points {record.rows_within:.4f}"
    if record.worst_channel_error is not None:
        return f"channel err {record.worst_channel_error:.3g}"
    return f"cos {record.worst_cosine:.4f}" if record.worst_cosine is not None else ""


def of_bound(distance: Distance | None) -> str:
    """The share of its roofline bound a variant reached at batch 1, and what bounds it (pipeline.decide.roofline)."""
    if distance is not None and distance.status == "counting error":
        return "count error"
    if distance is None or distance.of_bound is None:
        return ""
    return f"{distance.of_bound:.0%} {distance.bound_by}"


def cells(
    variant: str,
    r: VariantRecord,
    baseline: VariantRecord | None,
    distance: Distance | None = None,
    shared: list[str] | tuple[str, ...] = (),
    side_by_side: SpeedUp | None = None,
) -> dict:
    """Every cell of one variant's row, by column name: COLUMNS and BRIEF pick theirs; `shared`: the status
    marks every row has, said once under the table instead (shared_marks); `side_by_side`: its speed-up as the
    contest timed it, when it was a contender."""
    latency = r.latency_ms
    p50 = num(latency.p50 if latency else None)
    interval = num(r.p50_ci_pct, ".1f") + ("%" if r.p50_ci_pct is not None else "")
    return {
        "variant": variant,
        "target": r.device,
        "runtime": r.runtime,
        "prec": r.precision,
        "size MB": num(r.size_mb),
        "p50 ms": p50,
        "±95%": interval,
        "p50 ms ±95%": f"{p50} ±{interval}" if interval else p50,
        "p99 ms": num(latency.p99 if latency else None),
        "p50 speed-up": speedup(r, baseline, side_by_side),
        "speed-up": speedup(r, baseline, side_by_side),
        "peak samples/s (batch)": peak(r),
        "footprint MB": num(r.footprint_mb, ".0f"),
        "metric Δ": num(r.accuracy_delta, "+.4f"),
        "decision F1": num(r.decision_f1, ".4f"),
        "top-1 agree": num(r.top1_agreement, ".4f"),
        "worst ch err": num(r.worst_channel_error, ".3g"),
        "worst cos": num(r.worst_cosine, ".4f"),
        "nn recall@10": num(r.neighbour_recall, ".4f"),
        "Δ / fidelity": judging_figure(r),
        "of bound": of_bound(distance),
        "status": _status(r, shared),
    }


def rows(
    found: Records,
    order: list[str],
    baseline_name: str,
    columns: tuple[str, ...] = COLUMNS,
    distances: dict[str, Distance] | None = None,
    side_by_side: dict[str, SpeedUp] | None = None,
) -> list[list[str]]:
    """One row of `columns` per variant that is not skipped, grouped by target, in params.yaml order;
    speed-ups against `baseline_name` (`side_by_side`: the contest's, for its contenders), distances from
    the select stage's roofline. Skipped variants have no numbers: the notes say why."""
    baseline, distances, side_by_side = found.get(baseline_name), distances or {}, side_by_side or {}

    def place(variant: str) -> tuple[str, int]:
        return found[variant].device, order.index(variant) if variant in order else len(order)

    shown = [variant for variant in sorted(found, key=place) if found[variant].status != "skipped"]
    shared = shared_marks(found)
    return [
        [
            cells(variant, found[variant], baseline, distances.get(variant), shared, side_by_side.get(variant))[c]
            for c in columns
        ]
        for variant in shown
    ]


def contest_speedups(choice: Choice | None, baseline: str) -> dict[str, SpeedUp]:
    """The recorded choice's side-by-side speed-ups, when they were taken against `baseline`."""
    return choice.speedups if choice and choice.baseline == baseline else {}


def rich_table(title: str, body: list[list[str]], columns: tuple[str, ...] = COLUMNS, brief: bool = False) -> Table:
    """The last column is a status: rows not ok are dimmed. `brief`: no frame, as `dvc metrics show`
    prints, and only the status wraps: a row stays one line where the terminal allows."""
    table = Table(
        title=title, title_justify="left", header_style="bold", box=None if brief else HEAVY_HEAD, pad_edge=not brief
    )
    for column in columns:
        justify = "left" if column in LEFT else "right"
        table.add_column(column, justify=justify, no_wrap=brief and column != "status")
    for row in body:
        ok = row[-1].startswith("ok")
        table.add_row(*row[:-1], row[-1] if ok else f"[yellow]{row[-1]}[/]", style=None if ok else "dim")
    return table


def markdown_table(body: list[list[str]], columns: tuple[str, ...] = COLUMNS) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" if c in LEFT else "---:" for c in columns) + "|"]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in body])


def not_ok_notes(found: Records, not_applicable: dict[str, Skip] | None = None, names: int | None = None) -> list[str]:
    """One line per distinct (kind, reason), naming its variants: seven GPU variants skipped for
    the same missing driver make one line, not seven. `not_applicable`: the variants with no stages
    for this model (the recorded choice's), listed the same way. `names`: at most that many variants
    named in a line, the rest counted (the reason stays within a terminal's line)."""
    grouped: dict[tuple[str, str], list[str]] = {}
    for variant, skip in (not_applicable or {}).items():
        grouped.setdefault((skip.kind.value, skip.reason), []).append(variant)
    for variant, r in found.items():
        if not r.ok and variant not in (not_applicable or {}):
            grouped.setdefault((r.kind.value, r.reason), []).append(variant)
    return [f"{named(variants, names)}: {kind}: {reason}" for (kind, reason), variants in grouped.items()]


def named(variants: list[str], most: int | None) -> str:
    """`variants` listed, or the first `most` of them and how many more."""
    if most is None or len(variants) <= most:
        return ", ".join(variants)
    return f"{', '.join(variants[:most])} and {len(variants) - most} more"


def short_budget_notes(found: Records) -> list[str]:
    """One line per variant measured on the short budget (out of contention), with the screen's reason:
    why its throughput, concurrent and dim-sweep figures are missing."""
    return [f"{variant}: {r.screen.reason}" for variant, r in sorted(found.items()) if r.out_of_contention and r.screen]


def short_budget_line(found: Records) -> list[str]:
    """The variants measured on the short budget, in one line (the default; --wide gives each reason)."""
    short = sorted(variant for variant, r in found.items() if r.out_of_contention)
    return [f"out of contention (short budget, no sweeps): {', '.join(short)}"] if short else []


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


def terminal_columns(wide: bool) -> int:
    """The width to print at: the terminal's (COLUMNS when set; 80 when there is none), or WIDE at least."""
    columns = shutil.get_terminal_size().columns
    return max(columns, WIDE) if wide else columns


def model_notes(found: Records, choice: Choice | None, model: str, wide: bool) -> list[str]:
    """What the table leaves out, one line each: the deployed choice, one line per reason variants were
    skipped or failed (the select record's not-applicable ones with them), the short budgets, the status marks
    every row has."""
    notes = not_ok_notes(found, choice.not_applicable_skips() if choice else {}, None if wide else NAMES)
    notes += short_budget_notes(found) if wide else short_budget_line(found)
    notes += [MARKS[mark] for mark in shared_marks(found)]
    if choice:
        manifest = layout.deploy_dir(model) / layout.MANIFEST
        notes.insert(0, f"deploy: {choice.chosen}" + (
            f" ({choice.runtime}; why: {manifest.as_posix()})" if choice.status == "ok" else f": {choice.reason}"
        ))  # fmt: skip
    return notes


def print_model(console: Console, table: Table, notes: list[str], wide: bool) -> None:
    """One model's table and notes; the default keeps each note to one line of the terminal."""
    console.print(table)
    for note in notes:
        console.print(f"  {note}", style="dim", markup=False, no_wrap=not wide, overflow=None if wide else "ellipsis")
    console.print()


def print_summary(
    models: list[str] | None = None,
    root: Path = Path("."),
    markdown: bool = False,
    wide: bool = False,
    console: Console | None = None,
) -> None:
    """One table per model. The default fits the terminal: the columns a choice is read from, a line per
    note; `wide` (and `markdown`, which no terminal bounds): every column and every note in full."""
    wide = wide or markdown
    columns = COLUMNS if wide else BRIEF
    console = console or Console(width=terminal_columns(wide))
    params = load_params(root / PARAMS_FILE)
    name = records.machine_name(root)
    if name is None:
        raise PipelineError(f"{layout.env_file(root)}: no figures in this working tree yet: run `dvc repro`")
    order = ordered(params.all_variants)
    measured: list[VariantRecord] = []
    for model in models or params.models:
        found = records.load(model, root)
        if not found:
            console.print(f"{model}: no metrics yet on machine {name} (run `dvc repro`)")
            continue
        measured += found.values()
        baseline = BASELINES[params.model(model).source]
        title = f"{model} on {name} (speed-up against {baseline})"
        choice = records.load_choice(model, root)
        body = rows(found, order, baseline, columns, load_distances(model, root), contest_speedups(choice, baseline))
        notes = [*model_notes(found, choice, model, wide), SPEEDUP_NOTE.format(baseline=baseline)]
        if markdown:
            print(f"**{title}**\n\n{markdown_table(body)}\n")
            print("\n".join(f"- {note}" for note in notes) + "\n" if notes else "")
        else:
            print_model(console, rich_table(title, body, columns, brief=not wide), notes, wide)
    if wide:
        console.print(f"[dim]{how_measured(params, root, measured)}[/]")
    else:
        console.print(WIDE_HINT, style="dim", markup=False, no_wrap=True, overflow="ellipsis")
