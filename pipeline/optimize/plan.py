"""The plan stage: what each stage depends on beyond its data, as small files whose content changes
exactly when what they describe does.

- reports/plan/<variant>.json: a variant's params (its `*variants.<name>` section and every model's
  overrides of it), a hash of its pass's and runtime's code (named by string in the registry), and
  of its registry entry (and those of the variants it rescues: their entries decide its build).
  The plan stage checks the variant lists against the registry (pipeline.optimize.variant_lists)
  and every variant's knobs with its pass's Config first (pipeline.optimize.knobs).
- reports/plan/stage_<group>.json: a hash of every project file a stage group's code runs (the
  import walk of its entry script, pipeline.core.imports).

The registry's VARIANTS table is data of which each variant's stages read one entry: the groups in
ONE_ENTRY (and each variant's code) hash pipeline/core/registry.py without that table, and each
variant's plan file holds its own entry's hash, so an edit to one entry reruns that variant's stages
and the stages that read every entry (select, report), not the zoo's training or every build.

Stages depend on these files instead of on params.yaml and on lists of code files: DVC parses
params.yaml once per stage that declares params, and it rereads and rewrites the whole dvc.lock
after every stage, which with ~40 code files per stage grew to 745 KB and 5 s a stage. A shared
dependency on pipeline/optimize/passes would also rebuild every variant for an edit to one pass. An
unchanged file keeps its hash, so an edit reruns only the stages whose code or knobs it touches.
"""

from __future__ import annotations

import ast
import hashlib
from functools import cache
from pathlib import Path
from typing import Any

from pipeline.core import layout, registry
from pipeline.core.config import Params
from pipeline.core.files import atomic_dir, write_json
from pipeline.core.imports import code_hash, walk
from pipeline.optimize.knobs import check_variant_params
from pipeline.optimize.variant_lists import check_variant_lists
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


# The groups whose code reads no registry entry but its own variant's (none at all: train, export,
# bench_plan): their hash leaves the VARIANTS table out. select and report read every entry.
ONE_ENTRY = ("train", "export", "bench_plan", "build", "bench")
REGISTRY, TABLE = Path("pipeline/core/registry.py"), "VARIANTS"


def stage_code(group: str, root: Path = Path(".")) -> list[Path]:
    """The project files stage `group` runs."""
    return walk(STAGE_CODE[group], root)


def stage_hash(group: str, root: Path = Path(".")) -> dict[str, str]:
    """What reports/plan/stage_<group>.json holds: the hash of each file stage `group` runs."""
    return hashed(stage_code(group, root), root, whole_table=group not in ONE_ENTRY)


def variant_hash(variant: str, root: Path = Path(".")) -> dict[str, dict[str, str]]:
    """The code part of reports/plan/<variant>.json: its pass's and runtime's files, and the registry
    entries its stages read (its own, and those of the variants it rescues)."""
    entries = registry_entries(root)
    read = (variant, *registry.get(variant).rescues)
    return {"code": hashed(variant_code(variant, root), root, whole_table=False),
            "entries": {name: entries[name] for name in read}}  # fmt: skip


def hashed(files: list[Path], root: Path, whole_table: bool) -> dict[str, str]:
    """code_hash of `files`, the registry hashed without its VARIANTS table unless `whole_table`."""
    found = code_hash(files, root)
    if not whole_table and found.pop(REGISTRY.as_posix(), None):
        text = (root / REGISTRY).read_text()
        first, last = _table(text).lineno, _table(text).end_lineno
        lines = text.splitlines(keepends=True)
        found[f"{REGISTRY.as_posix()} without {TABLE}"] = _sha("".join(lines[: first - 1] + lines[last:]))
    return found


def registry_entries(root: Path = Path(".")) -> dict[str, str]:
    """{variant: the hash of its entry in the registry's VARIANTS table} (`Variant("name", ...)`, as
    parsed: a comment or a line break changes no hash)."""
    return _entries((root / REGISTRY).read_text())


@cache
def _entries(text: str) -> dict[str, str]:
    entries = {
        node.args[0].value: _sha(ast.dump(node))
        for node in ast.walk(_table(text))
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Variant"
        and node.args and isinstance(node.args[0], ast.Constant)
    }  # fmt: skip
    if missing := set(registry.VARIANTS) - set(entries):
        raise ValueError(f"{REGISTRY}: no `Variant({sorted(missing)[0]!r}, ...)` entry found in {TABLE}")
    return entries


@cache
def _table(text: str) -> ast.stmt:
    """The statement that assigns the registry's VARIANTS table."""
    for node in ast.parse(text).body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if any(getattr(target, "id", None) == TABLE for target in targets):
            return node
    raise ValueError(f"{REGISTRY}: no {TABLE} table")


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def write_plan(params: Params, root: Path = Path(".")) -> dict[str, Any]:
    source = (root / layout.PARAMS_FILE).as_posix()
    check_variant_lists(params, source)  # the variant lists against the registry
    check_variant_params(params, source)  # every pass's knobs, once per run
    with atomic_dir(layout.plan_dir(root)) as tmp:
        for group in STAGE_CODE:
            write_json(tmp / f"stage_{group}.json", {"code": stage_hash(group, root)})
        for name, section in params.all_variants.items():
            overrides = {m: c.overrides[name] for m, c in params.catalog.items() if name in c.overrides}
            write_json(
                tmp / f"{name}.json", {"params": section or {}, "overrides": overrides, **variant_hash(name, root)}
            )
    return {"status": "ok", "reason": f"{len(params.all_variants)} variants, {len(STAGE_CODE)} stage groups"}
