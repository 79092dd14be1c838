"""The plan stage: what each stage depends on beyond its data, as small files whose content changes
exactly when what they describe does.

- reports/plan/<variant>.json: a variant's params (its `*variants.<name>` section and every model's
  overrides of it) and a hash of its pass's and runtime's code (named by string in the registry).
  The plan stage checks every variant's knobs with its pass's Config first (pipeline.optimize.knobs).
- reports/plan/stage_<group>.json: a hash of every project file a stage group's code runs (the
  import walk of its entry script, pipeline.core.imports).

Stages depend on these files instead of on params.yaml and on lists of code files: DVC parses
params.yaml once per stage that declares params, and it rereads and rewrites the whole dvc.lock
after every stage, which with ~40 code files per stage grew to 745 KB and 5 s a stage. A shared
dependency on pipeline/optimize/passes would also rebuild every variant for an edit to one pass. An
unchanged file keeps its hash, so an edit reruns only the stages whose code or knobs it touches.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.core import layout, registry
from pipeline.core.config import Params
from pipeline.core.files import atomic_dir, write_json
from pipeline.core.imports import code_hash, walk
from pipeline.optimize.knobs import check_variant_params
from pipeline.prepare.sources import SOURCE_MODULES


def variant_code(variant: str, root: Path = Path(".")) -> list[Path]:
    """The project files a variant's pass and runtime adapter run (the registry names them by string)."""
    spec = registry.get(variant)
    return walk([spec.pass_ref.partition(":")[0], registry.RUNTIMES[spec.runtime].module], root)


# The entry script of each stage group and the modules it runs by name (a child process's entry).
STAGE_CODE = {
    "train": ["stages/train.py"],
    "export": ["stages/export.py", *SOURCE_MODULES.values(), "pipeline.prepare.hf_folder"],  # a catalog factory
    "build": ["stages/build.py"],
    "bench_plan": ["stages/bench_plan.py"],
    "bench": ["stages/bench.py", "pipeline.measure.worker", "pipeline.measure.generation"],
    "select": ["stages/select_artifact.py"],
    "report": ["stages/report.py"],
}


def stage_code(group: str, root: Path = Path(".")) -> list[Path]:
    """The project files stage `group` runs."""
    return walk(STAGE_CODE[group], root)


def write_plan(params: Params, root: Path = Path(".")) -> dict[str, Any]:
    check_variant_params(params, (root / layout.PARAMS_FILE).as_posix())  # every pass's knobs, once per run
    with atomic_dir(layout.plan_dir(root)) as tmp:
        for group in STAGE_CODE:
            write_json(tmp / f"stage_{group}.json", {"code": code_hash(stage_code(group, root), root)})
        for name, section in params.all_variants.items():
            overrides = {m: c.overrides[name] for m, c in params.catalog.items() if name in c.overrides}
            write_json(
                tmp / f"{name}.json",
                {"params": section or {}, "overrides": overrides, "code": code_hash(variant_code(name, root), root)},
            )
    return {"status": "ok", "reason": f"{len(params.all_variants)} variants, {len(STAGE_CODE)} stage groups"}
