"""The select stage's side-by-side re-measure: which contenders are one model, and their timing in one
fresh process.

The decision on what these figures mean (who is tied, who lost, the tie-break) is
pipeline.decide.contest's; benchmark scripts call `measure_contenders` to time their own pairs the
way the select stage does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.core import layout
from pipeline.core.config import Params
from pipeline.core.isolate import call
from pipeline.machine.lock import machine_lock
from pipeline.measure import interleaved  # imported, not only named: the select stage's code hash must cover it
from pipeline.measure.identity import signature
from pipeline.measure.stage import thread_env


def identical_groups(variants: list[str], root: Path, model: str) -> dict[str, list[str]]:
    """Representative (the first of `variants`, in rank order) -> every variant that is the same model."""
    groups: dict[str, list[str]] = {}
    for variant in variants:
        groups.setdefault(signature(layout.variant_dir(model, variant, root)), []).append(variant)
    return {members[0]: members for members in groups.values()}


def measure_contenders(
    model: str, variants: list[str], params: Params, root: Path, batch: int = 1, folders: dict[str, str] | None = None
) -> dict[str, Any]:
    """Run the interleaved timing in a fresh process, holding the machine, with the bench's threads
    (`batch` and `folders`, where each variant was built if not in its folder: for benchmark scripts)."""
    with machine_lock(exclusive=True):
        return call(
            f"{interleaved.__name__}:contest",
            {
                "model": model,
                "variants": variants,
                "percentile": params.select.percentile,
                "config": params.select.contest.model_dump(),
                "root": str(root),
                "batch": batch,
                "folders": folders,
            },
            timeout=params.bench.timeout_s,
            env=thread_env(params.bench.resolved_threads()),
            log=layout.log_file(model, "contest", "select", root),
        )
