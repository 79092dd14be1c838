"""The project modules a piece of code runs: a static walk of `import` statements (function-level
ones included), used to derive each DVC stage's code deps (pipeline.stagefile) and each variant's
code hash (pipeline.optimize.plan), so that an edit reruns the stages whose code it touches and no others.

Modules named by string (a pass or runtime in the registry, a child process's entry) are not
seen by the walk: whoever names them passes them in as roots.
"""

from __future__ import annotations

import ast
import hashlib
from functools import cache
from pathlib import Path

PACKAGE = "pipeline"


def module_file(module: str, root: Path = Path(".")) -> Path | None:
    """The file of a project module (`pipeline.x.y` or `models.m.net`), or None when it is not ours."""
    base = root / Path(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@cache
def _imports(path: Path) -> tuple[str, ...]:
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
            found += [f"{node.module}.{alias.name}" for alias in node.names]  # `from pkg import module`
    return tuple(found)


def walk(roots: list[str], root: Path = Path("."), prefix: str = PACKAGE) -> list[Path]:
    """Files of the `prefix` modules that `roots` (module names or script paths) import, transitively,
    parent packages' __init__ included (Python runs them on import). Sorted, relative to `root`."""
    seen: set[Path] = set()
    named: set[str] = set()  # module names already looked up: a walk meets each many times (every `from` names)
    todo = [Path(r) if r.endswith(".py") else r for r in roots]
    while todo:
        item = todo.pop()
        if isinstance(item, Path):
            path: Path | None = root / item
        elif item in named:
            continue
        else:
            named.add(item)
            path = module_file(item, root)
            parts = item.split(".")
            todo += [".".join(parts[:i]) for i in range(1, len(parts))]
        if path is None or path in seen:
            continue
        seen.add(path)
        todo += [name for name in _imports(path) if name == prefix or name.startswith(prefix + ".")]
    return sorted(p.relative_to(root) for p in seen)


def code_hash(files: list[Path], root: Path = Path(".")) -> dict[str, str]:
    """{file: short sha256} of each file: a dependency file's content changes exactly when the code does."""
    return {p.as_posix(): hashlib.sha256((root / p).read_bytes()).hexdigest()[:16] for p in files}
