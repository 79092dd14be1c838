"""No stale replays: every DVC stage depends on every project module its entry point imports.

DVC reruns a stage only when one of its `deps` changes; a module the stage imports but does not
list would let `dvc repro` replay figures computed by old code. The walk follows every static
import (function-level ones too) from stages/<name>.py through the `pipeline` package."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).parents[1]
# (stage file, where DVC reads it from): the machine template runs as machines/<name>/dvc.yaml.
STAGE_FILES = (
    ("prepare/dvc.yaml", "prepare/dvc.yaml"),
    ("fingerprint/dvc.yaml", "fingerprint/dvc.yaml"),
    ("pipeline/machine_dvc.yaml", "machines/m/dvc.yaml"),
    ("pipeline/machine_env_dvc.yaml", "machines/m/env/dvc.yaml"),
)


def module_file(name: str) -> Path | None:
    """The file of a `pipeline...` module (a package's __init__.py), or None outside the project."""
    if name != "pipeline" and not name.startswith("pipeline."):
        return None
    path = REPO / Path(*name.split("."))
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    return path.with_suffix(".py") if path.with_suffix(".py").is_file() else None


def imported_modules(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}  # `from pkg import module`
    return found


def reached_files(entry: Path) -> set[Path]:
    """Project files reachable from `entry` through imports (parent packages included)."""
    seen: set[Path] = set()
    todo = [entry]
    while todo:
        path = todo.pop()
        for name in imported_modules(path):
            parts = name.split(".")
            for i in range(1, len(parts) + 1):
                found = module_file(".".join(parts[:i]))
                if found and found not in seen:
                    seen.add(found)
                    todo.append(found)
    return seen


def stages() -> list[tuple[str, str, list[str]]]:
    """(stage file, stage name, deps) for every stage whose command runs a stages/*.py entry point."""
    out = []
    for stage_file, placed in STAGE_FILES:
        spec = yaml.safe_load((REPO / stage_file).read_text())["stages"]
        for name, stage in spec.items():
            body = stage.get("do", stage)
            match = re.search(r"python (stages/\w+\.py)", body["cmd"])
            wdir = REPO / Path(placed).parent / body.get("wdir", stage.get("wdir", "."))
            deps = [str((wdir / d).resolve().relative_to(REPO)) for d in body.get("deps", [])]
            out.append((stage_file, name, [match.group(1), *deps]))
    return out


@pytest.mark.parametrize(("stage_file", "name", "deps"), stages(), ids=[f"{f}:{n}" for f, n, _ in stages()])
def test_every_imported_project_module_is_a_dependency(stage_file, name, deps):
    entry, *listed = deps  # the entry point itself is a fixed two-line script: what it imports matters
    missing = sorted(
        str(path.relative_to(REPO))
        for path in reached_files(REPO / entry)
        if not any(path.relative_to(REPO).is_relative_to(dep) for dep in listed)
    )
    assert not missing, f"{stage_file}:{name} imports {missing} but does not list them in deps"
