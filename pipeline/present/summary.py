"""One table per model from this working tree's figures, with how the numbers were measured."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from pipeline.core import layout
from pipeline.core.config import PARAMS_FILE, Params, load_params
from pipeline.core.errors import PipelineError
from pipeline.core.evaluate import worst_cosine
from pipeline.core.files import read_json
from pipeline.core.records import load_details, load_env
from pipeline.core.registry import BASELINES, ordered


def num(value: Any, fmt: str = ".3g") -> str:
    """A figure for a table cell; empty when there is none."""
    return "" if value is None else format(value, fmt)


def speedup(metrics: dict[str, Any], baseline: dict[str, Any] | None) -> str:
    """p50 speed-up against `baseline`, measured on the same machine; empty when either is not ok."""
    if not baseline or baseline.get("status") != "ok" or metrics.get("status") != "ok":
        return ""
    return f"{baseline['latency_ms']['p50'] / metrics['latency_ms']['p50']:.2f}x"


COLUMNS = (
    "variant", "target", "runtime", "prec", "size MB", "p50 ms", "p99 ms", "p50 speed-up",
    "peak samples/s (batch)", "RSS MB", "acc Δ", "cosine", "top-1 agree", "status",
)  # fmt: skip
LEFT = {"machine", "measured on", "variant", "target", "runtime", "prec", "status"}  # left-aligned columns


def _status(m: dict[str, Any]) -> str:
    status = m.get("status", "?")
    marks = [f"noisy ±{m.get('noise_pct', 0):.0f}%"] if not m.get("stable", True) else []
    marks += ["in-sample"] if m.get("in_sample") else []
    return f"{status} ({', '.join(marks)})" if status == "ok" and marks else status


def rows(metrics: dict[str, dict[str, Any]], order: list[str], baseline_name: str) -> list[list[str]]:
    """One row of COLUMNS per variant that is not skipped, grouped by target, in params.yaml order;
    speed-ups against `baseline_name`. Skipped variants have no numbers: the notes say why."""
    baseline = metrics.get(baseline_name)
    out = []

    def place(variant: str) -> tuple[str, int]:
        return metrics[variant].get("device", "cpu"), order.index(variant) if variant in order else len(order)

    for variant in sorted(metrics, key=place):
        m = metrics[variant]
        if m.get("status") == "skipped":
            continue
        accuracy = m.get("accuracy") or {}
        latency = m.get("latency_ms") or {}
        throughput = m.get("throughput_sps") or {}
        out.append([
            variant,
            m.get("device", "cpu"),
            m.get("runtime", ""),
            m.get("precision", ""),
            num(m.get("size_mb")),
            num(latency.get("p50")),
            num(latency.get("p99")),
            speedup(m, baseline),
            f"{throughput['peak']:,.0f} (b{throughput['peak_batch']})" if throughput else "",
            num(m.get("peak_rss_mb"), ".0f"),
            num(accuracy.get("delta"), "+.4f"),
            num(worst_cosine(m.get("fidelity")), ".4f"),
            num(next(iter((m.get("fidelity") or {}).values()), {}).get("top1_agreement"), ".4f"),
            _status(m),
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


def not_ok_notes(metrics: dict[str, dict[str, Any]]) -> list[str]:
    """One line per distinct (status, reason), naming its variants: seven GPU variants skipped for
    the same missing driver make one line, not seven."""
    grouped: dict[tuple[str, str], list[str]] = {}
    for variant, m in metrics.items():
        if m.get("status") != "ok":
            grouped.setdefault((m.get("status", "?"), m.get("reason", "")), []).append(variant)
    return [f"{', '.join(names)}: {status}: {reason}" for (status, reason), names in grouped.items()]


def hardware(env: dict[str, Any]) -> str:
    """The hardware a machine's env.json recorded: CPU model, cores, GPUs."""
    cpu = env.get("cpu", {})
    gpus = f", GPU {env['gpus']}" if env.get("gpus", "none") != "none" else ""
    return f"{cpu.get('model', '?')} ({cpu.get('cores', '?')} cores{gpus})"


def how_measured(params: Params, results: Path) -> str:
    """How the figures under `results` (a project root) were measured, in one paragraph."""
    bench = params.bench
    env = load_env(results)
    machine = env.get("machine", {}).get("name", results.name)
    latency = bench.latency
    return (
        f"Measured on machine {machine}: {hardware(env)}, "
        f"{bench.resolved_threads()} intra-op threads, each variant in its own process. "
        f"Latency: batch 1, after >= {bench.warmup.iters} warm-up calls and {bench.warmup.seconds:g} s; "
        f"{latency.segments} segments (before and after the throughput sweep), each >= {latency.min_iters} calls "
        f"and {latency.min_seconds:g} s until {latency.stable_windows} windows of {latency.window_seconds:g} s "
        f"agree within {latency.stability_pct:g}%; 'noisy' when the segments' p50s differ by more than that. "
        f"Throughput: one synchronous caller, {bench.throughput.seconds:g} s per batch size "
        f"{bench.throughput.batches}, stopping when a batch gains < {bench.throughput.min_gain_pct:g}% or one call "
        f"takes > {bench.throughput.max_call_s:g} s (not tried when the previous batch's rate says over twice that). "
        f"RSS: sampled over load and batch-1 latency. "
        f"Accuracy Δ and cosine: vs the FP32 source on the held-out scoring rows."
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
    name = load_env(root).get("machine", {}).get("name")
    if name is None:
        raise PipelineError(f"{layout.env_file(root)}: no figures in this working tree yet: run `dvc repro`")
    order = ordered(params.all_variants)
    for model in models or params.models:
        metrics = load_details(model, results)
        if not metrics:
            console.print(f"{model}: no metrics yet on machine {name} (run `dvc repro`)")
            continue
        baseline = BASELINES[params.model(model).source]
        body = rows(metrics, order, baseline)
        title = f"{model} on {name} (speed-up against {baseline})"
        notes = not_ok_notes(metrics)
        choice = layout.selection_file(model, results)
        if choice.exists():
            record = read_json(choice)
            manifest = layout.deploy_dir(model) / layout.MANIFEST
            notes.insert(0, f"deploy: {record['chosen']}" + (
                f" ({record['runtime']}; why: {manifest.as_posix()})" if record["status"] == "ok"
                else f": {record['reason']}"
            ))  # fmt: skip
        if markdown:
            print(f"**{title}**\n\n{markdown_table(body)}\n")
            print("\n".join(f"- {note}" for note in notes) + "\n" if notes else "")
        else:
            console.print(rich_table(title, body))
            for note in notes:
                console.print(f"  {note}", style="dim", markup=False)
            console.print()
    console.print(f"[dim]{how_measured(params, results)}[/]")
