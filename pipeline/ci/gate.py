"""The regression gate for CI: compare each model's chosen artifact now with a git revision's.

It fails (exit 1) when, for any model, the chosen artifact's latency percentile got worse by more
than the threshold, its accuracy drop passes the model's constraint (vs the FP32 source, or vs the
revision's choice), the choice moved to a slower artifact (by more than the noise both runs
measured), or nothing meets the constraints any more. Everything is read from the metrics files
the pipeline commits (reports/details and reports/selection), so it needs git, not the DVC cache.
When the revision's figures come from another CPU (reports/env.json) its latency is never judged from them: the
CLI times both choices here, side by side (pipeline.ci.remeasure), or says why it cannot and exits NOT_COMPARABLE.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from pipeline.core import layout, records
from pipeline.core.config import Params
from pipeline.core.errors import PipelineError
from pipeline.core.quality import quality_violations
from pipeline.core.records import Accuracy, Records
from pipeline.core.records import env as records_env

PASSED, REGRESSED, NOT_COMPARABLE = 0, 1, 3  # exit statuses (2: bad input, as every command)


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=False)


def check_revision(rev: str, root: Path) -> str:
    """The commit `rev` names, or one clear error (shallow CI clones often lack HEAD~1)."""
    result = _git(root, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    if result.returncode != 0:
        raise PipelineError(
            f"gate: git revision '{rev}' not found in {root.resolve()} "
            "(in CI, fetch more history: `git fetch --depth=2` or `fetch-depth: 0`)"
        )
    return result.stdout.strip()


def _json_at(rev: str, path: PurePosixPath, root: Path) -> Any:
    result = _git(root, "show", f"{rev}:{path}")
    if result.returncode != 0:
        return None
    try:
        return json.loads(result.stdout)
    except json.JSONDecodeError as error:
        raise PipelineError(f"gate: {path} at {rev} is not valid JSON ({error})") from error


def records_at(rev: str, model: str, root: Path, results: Path = Path(".")) -> Records:
    """Every variant's record for `model` as committed at `rev` ({} when the model was not there); an
    older revision's keys this version no longer knows are dropped."""
    folder = PurePosixPath(layout.details_dir(results).as_posix()) / model
    listing = _git(root, "ls-tree", "--name-only", f"{rev}:{folder}")
    names = [n for n in listing.stdout.split() if n.endswith(".json")] if listing.returncode == 0 else []
    return {PurePosixPath(n).stem: records.parse(_json_at(rev, folder / n, root), lenient=True) for n in sorted(names)}


def choice_at(rev: str | None, model: str, root: Path, results: Path = Path(".")) -> records.Choice | None:
    """The select stage's recorded decision for `model` in `results` at `rev` (None: the workspace);
    None where there is none (a revision older than the select stage). An older revision's keys this
    version dropped are ignored."""
    if rev is None:
        return records.load_choice(model, root / results)
    data = _json_at(rev, PurePosixPath(layout.selection_file(model, results).as_posix()), root)
    return records.parse_choice(data, lenient=True) if data else None


def _deployed(choice: records.Choice | None, found: Records) -> str | None:
    """The variant `choice` deployed, when its figures are among `found`."""
    name = choice.chosen if choice else None
    return name if name and name != "none" and name in found else None


@dataclass
class Verdict:
    model: str
    before: str | None
    after: str | None
    before_ms: float | None = None
    after_ms: float | None = None
    before_delta: float | None = None
    after_delta: float | None = None
    noise_pct: float = 0.0
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def change_pct(self) -> float | None:
        if self.before_ms and self.after_ms is not None:
            return 100.0 * (self.after_ms / self.before_ms - 1.0)
        return None


def judge(
    model: str,
    before: Records,
    after: Records,
    choice_before: records.Choice | None,
    choice_after: records.Choice | None,
    params: Params,
    threshold_pct: float,
    percentile: str,
    latency_comparable: bool = True,
) -> Verdict:
    """One model's verdict from each side's recorded choice: the failures (if any) and what moved. Latency is judged
    from the stored figures only when both sides were measured on the same CPU (`latency_comparable`); quality,
    feasibility and the choice itself always are."""
    limit = params.select.constraints_for(model).max_metric_drop
    chosen_before, chosen_after = _deployed(choice_before, before), _deployed(choice_after, after)
    verdict = Verdict(model, chosen_before, chosen_after)
    if choice_after is None:
        verdict.failures.append("no recorded choice in the workspace (reports/selection): run `dvc repro`")
        return verdict
    if chosen_after is None:
        verdict.failures.append("no variant meets the constraints now (see reports/selection)")
        return verdict
    now = after[chosen_after]
    verdict.after_ms, verdict.after_delta = now.latency(percentile), now.accuracy_delta
    constraints = params.select.constraints_for(model)
    for broken in quality_violations(now, constraints):
        verdict.failures.append(f"{broken.message} vs the FP32 source ({broken.constraint})")
    if chosen_before is None:
        if not before:
            verdict.notes.append("not in the base revision (new model)")
        elif choice_before is None:
            verdict.notes.append("no recorded choice at the base revision (older than the select stage): not compared")
        else:
            verdict.notes.append("nothing met the constraints at the base revision")
        return verdict
    then = before[chosen_before]
    verdict.before_ms, verdict.before_delta = then.latency(percentile), then.accuracy_delta
    verdict.noise_pct = (then.p50_ci_pct or 0.0) + (now.p50_ci_pct or 0.0)  # both intervals
    change = verdict.change_pct or 0.0
    if not latency_comparable:
        verdict.notes.append("latency not judged from the stored figures: the two sides ran on different CPUs")
    elif change > threshold_pct:
        verdict.failures.append(f"{percentile} latency regressed {change:+.1f}% (threshold {threshold_pct:g}%)")
        if change <= verdict.noise_pct:
            verdict.notes.append(
                f"within the two p50 intervals (±{verdict.noise_pct:.1f}% together): rerun with --remeasure to confirm"
            )
    elif chosen_before != chosen_after and change > verdict.noise_pct:
        verdict.failures.append(
            f"choice changed to a slower artifact: {chosen_after} is {change:+.1f}% vs {chosen_before} "
            f"(beyond the two p50 intervals, ±{verdict.noise_pct:.1f}% together)"
        )
    was, is_now = then.accuracy or Accuracy(metric="none"), now.accuracy or Accuracy(metric="none")
    if limit is not None and was.metric == is_now.metric and was.value is not None and is_now.value is not None:
        fall = was.value - is_now.value if is_now.higher_is_better else is_now.value - was.value
        if fall > limit:
            verdict.failures.append(
                f"{is_now.metric} fell {fall:.4g} since the base revision ({was.value:.4g} -> "
                f"{is_now.value:.4g}), more than max_metric_drop {limit}"
            )
    return verdict


def moved(before: Records, after: Records, percentile: str, threshold_pct: float) -> list[tuple[str, float, float]]:
    """Variants (chosen or not) whose latency moved by more than the threshold either way: context, not failures."""
    out = []
    for variant in sorted(set(before) & set(after)):
        a, b = before[variant], after[variant]
        if a.ok and b.ok:
            old, new = a.latency(percentile), b.latency(percentile)
            if old and abs(new / old - 1.0) * 100.0 > threshold_pct:
                out.append((variant, old, new))
    return out


@dataclass
class GateRun:
    """What the stored figures say: each model's verdict, the variants that moved, warnings, each side's machine, and
    whether their latencies compare (measured on the same CPU)."""

    verdicts: list[Verdict]
    movements: dict[str, list[tuple[str, float, float]]]
    warnings: list[str]
    machines: tuple[str, str]  # the base revision's, the workspace's
    comparable: bool

    @property
    def failed(self) -> bool:
        return any(v.failures for v in self.verdicts)


def machine_of(env: records_env.Env | None) -> str:
    return f"{env.machine_name or 'unnamed'} ({env.cpu_id})" if env else "unknown (no reports/env.json)"


def run_gate(
    params: Params,
    rev: str = "HEAD~1",
    threshold_pct: float = 10.0,
    percentile: str | None = None,
    models: list[str] | None = None,
    root: Path = Path("."),
) -> GateRun:
    """Compare the figures in the workspace with those at `rev`. Latency is compared only where both sides' env.json
    name the same CPU (or either has none, as before env.json was recorded: then with a warning)."""
    if threshold_pct < 0:
        raise PipelineError(f"gate: --threshold must be >= 0 percent, got {threshold_pct}")
    percentile = percentile or params.select.percentile
    check_revision(rev, root)
    unknown = sorted(set(models or []) - set(params.models))
    if unknown:
        raise PipelineError(f"gate: unknown model(s) {', '.join(unknown)}; params.yaml has {', '.join(params.models)}")
    figures = layout.details_dir(root)
    if not figures.is_dir():
        raise PipelineError(f"gate: {figures}: no figures in the workspace: run `dvc repro` first")
    results = Path(".")  # relative: also a path inside git revisions
    warnings = []
    then = _json_at(rev, PurePosixPath(layout.env_file(results).as_posix()), root)
    env_then, env_now = records_env.parse(then) if then else None, records_env.load(root / results)
    comparable = not (env_then and env_now and env_then.cpu_id != env_now.cpu_id)
    if not comparable:
        warnings.append(f"the base revision was measured on another CPU ({machine_of(env_then)}, this workspace on "
                        f"{machine_of(env_now)}): its latency figures are not compared with these")  # fmt: skip
    elif not (env_then and env_now):
        warnings.append("one side names no machine (no reports/env.json): latency compared as if on the same CPU")
    verdicts, movements = [], {}
    for model in models or list(params.models):
        before, after = records_at(rev, model, root, results), records.load(model, root / results)
        verdicts.append(
            judge(
                model,
                before,
                after,
                choice_at(rev, model, root, results),
                choice_at(None, model, root, results),
                params,
                threshold_pct,
                percentile,
                comparable,
            )
        )
        movements[model] = moved(before, after, percentile, threshold_pct) if comparable else []
    return GateRun(verdicts, movements, warnings, (machine_of(env_then), machine_of(env_now)), comparable)


def print_gate(run: GateRun, rev: str, threshold_pct: float, percentile: str) -> None:
    """Each side's machine first, then the table of what moved and one line per failure."""
    from rich.console import Console
    from rich.table import Table

    verdicts, movements, warnings = run.verdicts, run.movements, run.warnings
    console = Console(width=160)
    console.print(f"gate: {rev} measured on {run.machines[0]}; the workspace on {run.machines[1]}")
    table = Table(title=f"Regression gate: workspace vs {rev} ({percentile} latency, threshold {threshold_pct:g}%)")
    for column in ("model", "chosen", f"{percentile} ms", "change", "noise", "accuracy Δ", "verdict"):
        table.add_column(column, justify="right" if column in ("change", "noise") else "left")

    def pair(a: Any, b: Any, fmt: str) -> str:
        show = lambda v: "-" if v is None else format(v, fmt)  # noqa: E731
        return show(b) if a == b else f"{show(a)} -> {show(b)}"

    for v in verdicts:
        table.add_row(
            v.model,
            pair(v.before or "none", v.after or "none", ""),
            pair(v.before_ms, v.after_ms, ".4g"),
            "" if v.change_pct is None else f"{v.change_pct:+.1f}%",
            f"±{v.noise_pct:.1f}%" if v.before_ms else "",
            pair(v.before_delta, v.after_delta, "+.4f"),
            "[red]FAIL[/red]" if v.failures else "ok",
        )
    console.print(table)
    for model, rows in movements.items():
        if rows:
            listed = ", ".join(f"{name} {a:.4g} -> {b:.4g} ms ({100 * (b / a - 1):+.0f}%)" for name, a, b in rows)
            console.print(f"{model}: variants that moved more than {threshold_pct:g}%: {listed}")
    for line in warnings:
        console.print(f"[yellow]warning:[/yellow] {line}")
    for v in verdicts:
        for failure in v.failures:
            console.print(f"[red]FAIL[/red] {v.model}: {failure}")
        for note in v.notes:
            console.print(f"note {v.model}: {note}")
    failed = sum(bool(v.failures) for v in verdicts)
    console.print(f"gate: {'FAILED' if failed else 'passed'} ({failed} of {len(verdicts)} model(s) regressed)")
