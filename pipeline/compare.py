"""The cross-machine view: each model's chosen artifact and key variants on every machine class
side by side, each row with the machine it was measured on (`python -m pipeline summary --machines`).

Rows come from each machine's own committed files (machines/<name>/reports): a figure is only
ever shown under the machine that measured it. Speed-ups are against the baseline measured on
the same machine; nothing is compared across machines except by the reader.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from rich.console import Console

from pipeline import layout
from pipeline.config import PARAMS_FILE, load_params
from pipeline.evaluate import worst_cosine
from pipeline.files import read_json
from pipeline.machines import known
from pipeline.results import load_env, load_metrics
from pipeline.summary import hardware, markdown_table, num, rich_table, speedup
from pipeline.variants import BASELINES

COLUMNS = (
    "machine", "measured on", "variant", "target", "prec", "p50 ms", "p50 speed-up",
    "peak samples/s (batch)", "RSS MB", "acc Δ", "cosine", "status",
)  # fmt: skip


def key_variants(metrics: dict[str, dict[str, Any]], chosen: str | None, baseline: str) -> list[str]:
    """The chosen variant, the baseline, and the fastest ok variant of each (target, precision)."""
    fastest: dict[tuple[str, str], str] = {}
    for name, m in metrics.items():
        if m.get("status") != "ok":
            continue
        key = (m.get("device", "cpu"), m.get("precision", ""))
        best = fastest.get(key)
        if best is None or m["latency_ms"]["p50"] < metrics[best]["latency_ms"]["p50"]:
            fastest[key] = name
    picked = [chosen, baseline, *sorted(fastest.values(), key=lambda n: metrics[n]["latency_ms"]["p50"])]
    return list(dict.fromkeys(n for n in picked if n and n in metrics))


def machine_rows(machine: str, model: str, source: str, root: Path) -> list[list[str]]:
    results = layout.machine_root(machine, root)
    metrics = load_metrics(model, results)
    if not metrics:
        return []
    selection = layout.selection_file(model, results)
    chosen = read_json(selection)["chosen"] if selection.exists() else None
    baseline_name = BASELINES[source]
    baseline = metrics.get(baseline_name)
    measured_on = hardware(load_env(results))
    out = []
    for name in key_variants(metrics, chosen, baseline_name):
        m = metrics[name]
        latency = m.get("latency_ms") or {}
        throughput = m.get("throughput_sps") or {}
        out.append([
            machine,
            measured_on,
            f"{name} (deploy)" if name == chosen else name,
            m.get("device", "cpu"),
            m.get("precision", ""),
            num(latency.get("p50"), ".4g"),
            speedup(m, baseline),
            f"{throughput['peak']:,.0f} (b{throughput['peak_batch']})" if throughput else "",
            num(m.get("peak_rss_mb"), ".0f"),
            num((m.get("accuracy") or {}).get("delta"), "+.4f"),
            num(worst_cosine(m.get("fidelity")), ".4f"),
            m.get("status", "?"),
        ])  # fmt: skip
    return out


def comparison(root: Path = Path("."), models: list[str] | None = None) -> dict[str, list[list[str]]]:
    """{model: rows over every machine with results}, machines in name order."""
    params = load_params(root / PARAMS_FILE)
    machines = known(root)
    return {
        model: [row for machine in machines for row in machine_rows(machine, model, params.model(model).source, root)]
        for model in models or params.models
    }


def print_comparison(
    models: list[str] | None = None, root: Path = Path("."), markdown: bool = False, output: Path | None = None
) -> None:
    """Print the view (terminal or Markdown), or write it as a Markdown page to `output`."""
    tables = comparison(root, models)
    machines = known(root)
    if output or markdown:
        lines = ["# Machines side by side", ""]
        lines += [f"Machines with results: {', '.join(machines) or 'none'}. Each machine's report: "]
        lines += [", ".join(f"[{m}](../{layout.machine_root(m).as_posix()}/reports/report/index.md)" for m in machines)]
        lines += ["", "Rows per machine: the deployed variant, the baseline, the fastest ok variant of each"]
        lines += ["target and precision. Speed-ups are against the baseline on the same machine.", ""]
        for model, body in tables.items():
            lines += [f"## {model}", "", markdown_table(body, COLUMNS) if body else "No results yet.", ""]
        text = "\n".join(lines)
        if output:
            from pipeline.files import write_text

            write_text(output, text)
        else:
            print(text)
        return
    console = Console() if sys.stdout.isatty() else Console(width=220)
    for model, body in tables.items():
        console.print(rich_table(f"{model} on every machine", body, COLUMNS) if body else f"{model}: no results yet")
    console.print(f"[dim]machines: {', '.join(machines) or 'none'} (machines/<name>/reports)[/]")
