"""The cross-machine view: each model's chosen artifact and key variants on every machine class
side by side, each row with the machine it was measured on (`python -m pipeline summary --machines`).

Rows come from each machine's results branch (results/<name>, docs/machines.md) and from this
working tree: a figure is only ever shown under the machine that measured it. Speed-ups are
against the baseline measured on the same machine; nothing is compared across machines except
by the reader.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console

from pipeline.core import layout
from pipeline.core.config import PARAMS_FILE, Params, load_params
from pipeline.core.evaluate import worst_row_cosine
from pipeline.core.files import read_json
from pipeline.core.records import load_details, load_env
from pipeline.core.registry import BASELINES
from pipeline.machine.naming import BRANCH_PREFIX
from pipeline.present.summary import hardware, markdown_table, num, rich_table, speedup

COLUMNS = (
    "machine", "measured on", "variant", "target", "prec", "p50 ms", "p50 speed-up",
    "peak samples/s (batch)", "footprint MB", "acc Δ", "worst cos", "status",
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


def machine_rows(machine: str, model: str, source: str, results: Path) -> list[list[str]]:
    metrics = load_details(model, results)
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
            num(m.get("footprint_mb"), ".0f"),
            num((m.get("accuracy") or {}).get("delta"), "+.4f"),
            num(worst_row_cosine(m.get("fidelity")), ".4f"),
            m.get("status", "?"),
        ])  # fmt: skip
    return out


def results_branches(root: Path = Path(".")) -> dict[str, str]:
    """{machine: ref} for every results/<machine> branch, local first, else fetched from a remote."""
    refs = subprocess.run(
        [
            "git",
            "for-each-ref",
            "--format=%(refname:short)",
            f"refs/heads/{BRANCH_PREFIX}*",
            f"refs/remotes/*/{BRANCH_PREFIX}*",
        ],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split()
    found: dict[str, str] = {}
    for ref in refs:  # local branches come first in git's order: they win
        found.setdefault(ref.rpartition(BRANCH_PREFIX)[2], ref)
    return found


@contextmanager
def results_trees(root: Path = Path(".")) -> Iterator[dict[str, Path]]:
    """{machine: folder holding its reports/}: this working tree's machine, then every results/<name>
    branch's (extracted with `git archive` into a temporary folder)."""
    trees: dict[str, Path] = {}
    here = load_env(root).get("machine", {}).get("name")
    if here:
        trees[here] = root
    with tempfile.TemporaryDirectory(prefix="machines-") as tmp:
        for machine, ref in results_branches(root).items():
            if machine in trees:
                continue
            folder = Path(tmp) / machine
            folder.mkdir()
            archive = subprocess.run(["git", "archive", ref, "reports"], cwd=root, capture_output=True, check=False)
            if archive.returncode == 0:
                subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)
                trees[machine] = folder
        yield dict(sorted(trees.items()))


def comparison(trees: dict[str, Path], models: list[str], params: Params) -> dict[str, list[list[str]]]:
    """{model: rows over every machine with results}, machines in name order."""
    return {
        model: [
            row
            for machine, tree in trees.items()
            for row in machine_rows(machine, model, params.model(model).source, tree)
        ]
        for model in models
    }


def print_comparison(
    models: list[str] | None = None, root: Path = Path("."), markdown: bool = False, output: Path | None = None
) -> None:
    """Print the view (terminal or Markdown), or write it as a Markdown page to `output`."""
    params = load_params(root / PARAMS_FILE)
    with results_trees(root) as trees:
        tables = comparison(trees, models or params.models, params)
    machines = list(trees)
    if output or markdown:
        lines = ["# Machines side by side", ""]
        lines += [
            f"Machines with results: {', '.join(machines) or 'none'} (this tree and the results/<name> branches)."
        ]
        lines += ["", "Rows per machine: the deployed variant, the baseline, the fastest ok variant of each"]
        lines += ["target and precision. Speed-ups are against the baseline on the same machine.", ""]
        for model, body in tables.items():
            lines += [f"## {model}", "", markdown_table(body, COLUMNS) if body else "No results yet.", ""]
        text = "\n".join(lines)
        if output:
            from pipeline.core.files import write_text

            write_text(output, text)
        else:
            print(text)
        return
    console = Console() if sys.stdout.isatty() else Console(width=220)
    for model, body in tables.items():
        console.print(rich_table(f"{model} on every machine", body, COLUMNS) if body else f"{model}: no results yet")
    console.print(f"[dim]machines: {', '.join(machines) or 'none'} (this tree and the results/<name> branches)[/]")
