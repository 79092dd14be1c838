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

from rich.console import Console

from pipeline.core import records
from pipeline.core.config import PARAMS_FILE, Params, load_params
from pipeline.core.records import Records, load_env
from pipeline.core.registry import BASELINES
from pipeline.machine.naming import BRANCH_PREFIX
from pipeline.present.summary import markdown_table, num, peak, rich_table, speedup

COLUMNS = (
    "machine", "measured on", "variant", "target", "prec", "p50 ms", "p50 speed-up",
    "peak samples/s (batch)", "footprint MB", "acc Δ", "worst cos", "status",
)  # fmt: skip


def key_variants(found: Records, chosen: str | None, baseline: str) -> list[str]:
    """The chosen variant, the baseline, and the fastest ok variant of each (target, precision)."""
    fastest: dict[tuple[str, str], str] = {}
    for name, r in found.items():
        if not r.ok:
            continue
        key = (r.device, r.precision)
        best = fastest.get(key)
        if best is None or r.p50_ms < found[best].p50_ms:
            fastest[key] = name
    picked = [chosen, baseline, *sorted(fastest.values(), key=lambda n: found[n].p50_ms)]
    return list(dict.fromkeys(n for n in picked if n and n in found))


def machine_rows(machine: str, model: str, source: str, results: Path) -> list[list[str]]:
    found = records.load(model, results)
    if not found:
        return []
    decided = records.load_choice(model, results, lenient=True)  # a results branch may be older
    chosen = decided.chosen if decided else None
    baseline_name = BASELINES[source]
    baseline = found.get(baseline_name)
    measured_on = load_env(results).hardware
    out = []
    for name in key_variants(found, chosen, baseline_name):
        r = found[name]
        out.append([
            machine,
            measured_on,
            f"{name} (deploy)" if name == chosen else name,
            r.device,
            r.precision,
            num(r.latency_ms.p50 if r.latency_ms else None, ".4g"),
            speedup(r, baseline),
            peak(r),
            num(r.footprint_mb, ".0f"),
            num(r.accuracy_delta, "+.4f"),
            num(r.worst_cosine, ".4f"),
            r.status,
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
    here = records.machine_name(root)
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
