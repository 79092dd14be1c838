"""`gate --remeasure`: judge latency on paired figures measured now, not on numbers from another day.

The stored comparison reads metrics committed on different days; on this kind of machine the
day-to-day drift alone moved many variants 20-110%. Here the base revision's chosen artifact (out of
the DVC cache, in a temporary git worktree at that revision; rebuilt there by `dvc repro` when the
cache lacks it) and the current one are benchmarked alternately, A B A B ..., each run in a fresh
process with the same harness, and the medians of those rounds are compared.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.core import layout
from pipeline.core.config import PARAMS_FILE, load_params
from pipeline.core.errors import PipelineError
from pipeline.core.isolate import call
from pipeline.measure.stage import thread_env


@dataclass(frozen=True)
class Side:
    """One artifact to time: a project root, a model and the variant chosen there."""

    root: Path
    model: str
    variant: str


@dataclass
class Paired:
    model: str
    base: Side
    now: Side
    base_ms: list[float]
    now_ms: list[float]

    @property
    def change_pct(self) -> float:
        return 100.0 * (statistics.median(self.now_ms) / statistics.median(self.base_ms) - 1.0)

    def failure(self, threshold_pct: float) -> str | None:
        if self.change_pct > threshold_pct:
            return (
                f"paired p50 regressed {self.change_pct:+.1f}% ({self.base.variant} at the base revision "
                f"{statistics.median(self.base_ms):.4g} ms -> {self.now.variant} now "
                f"{statistics.median(self.now_ms):.4g} ms; threshold {threshold_pct:g}%)"
            )
        return None


def artifact_of(root: Path, model: str, variant: str) -> tuple[Path, str]:
    """Where `variant` of `model` is built in project `root`, and the DVC stage that builds it."""
    return layout.variant_dir(model, variant), layout.dvc_stage("build", model, variant)


def latency_in_fresh_process(root: Path, model: str, variant: str) -> dict[str, Any]:
    """Batch-1 latency by the pipeline's harness, in a process of its own (also used by benchmarks/)."""
    artifact, _ = artifact_of(root, model, variant)
    bench = load_params(root / PARAMS_FILE).bench
    return call(
        "pipeline.measure.worker:measure_latency_only",
        {"model": model, "artifact": str(root / artifact), "root": str(root)},
        timeout=bench.timeout_s,
        env=thread_env(bench.resolved_threads()),  # the bench stage's thread environment (OpenMP, MKL, XLA)
    )


def p50_now(side: Side) -> float:
    return float(latency_in_fresh_process(side.root, side.model, side.variant)["latency_ms"]["p50"])


def paired(model: str, base: Side, now: Side, rounds: int) -> Paired:
    """`rounds` alternating measurements of the two sides (base first in odd rounds, now first in even)."""
    times: dict[str, list[float]] = {"base": [], "now": []}
    for i in range(rounds):
        for name, side in (("base", base), ("now", now)) if i % 2 == 0 else (("now", now), ("base", base)):
            times[name].append(p50_now(side))
    return Paired(model, base, now, times["base"], times["now"])


def _run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)


@contextmanager
def worktree_at(rev: str, root: Path) -> Iterator[Path]:
    """A temporary git worktree at `rev` that shares this project's DVC cache; removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="gate-base-")) / "tree"
    added = _run(["git", "worktree", "add", "--detach", str(folder), rev], root)
    if added.returncode != 0:
        raise PipelineError(f"gate --remeasure: git worktree add {rev} failed: {added.stderr.strip()}")
    try:
        cache = _run(["dvc", "cache", "dir"], root).stdout.strip() or str(root.resolve() / ".dvc" / "cache")
        _run(["dvc", "cache", "dir", "--local", cache], folder)
        yield folder
    finally:
        _run(["git", "worktree", "remove", "--force", str(folder)], root)
        shutil.rmtree(folder.parent, ignore_errors=True)


def materialize(tree: Path, model: str, variant: str) -> str:
    """Put the model's source and the variant's artifact into `tree`: from the DVC cache, else rebuilt."""
    artifact, stage = artifact_of(tree, model, variant)
    targets = [layout.source_dir(model).as_posix(), artifact.as_posix()]
    if _run(["dvc", "checkout", *targets], tree).returncode == 0 and all((tree / t).is_dir() for t in targets):
        return "DVC cache"
    built = _run(["dvc", "repro", stage], tree)
    if built.returncode != 0:
        tail = (built.stderr or built.stdout).strip().splitlines()[-1:] or ["no output"]
        raise PipelineError(f"gate --remeasure: cannot rebuild {model}/{variant} at the base revision: {tail[0]}")
    return "rebuilt in a worktree"


def remeasure(
    pairs: dict[str, tuple[str | None, str | None]], rev: str, rounds: int, root: Path = Path(".")
) -> tuple[list[Paired], dict[str, Any]]:
    """Paired figures for every model whose base and current choices both exist."""
    results, origins = [], {}
    with worktree_at(rev, root) as tree:
        for model, (before, after) in pairs.items():
            if before is None or after is None:
                continue
            origins[model] = materialize(tree, model, before)
            base, now = Side(tree, model, before), Side(root, model, after)
            results.append(paired(model, base, now, rounds))
    return results, origins
