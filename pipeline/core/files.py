"""File helpers: atomic writes, sizes, digests.

Every artifact and metrics file is written to a temporary sibling and renamed into place, so an
interrupted stage never leaves a half-written file that a later stage (or DVC) would trust.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

IGNORED_NAMES = {"__pycache__", ".ipynb_checkpoints"}


def _tmp_sibling(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


def remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


@contextmanager
def atomic_dir(final: Path) -> Iterator[Path]:
    """Yield a fresh temporary directory that replaces `final` only if the block succeeds."""
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp_sibling(final)
    remove(tmp)
    tmp.mkdir()
    try:
        yield tmp
    except BaseException:
        remove(tmp)
        raise
    remove(final)
    tmp.rename(final)


def _round_floats(value: Any, digits: int = 6) -> Any:
    """Round to `digits` significant figures: more is noise and makes `dvc metrics diff` unreadable."""
    if isinstance(value, float):
        if not math.isfinite(value) or value == 0.0:
            return value if math.isfinite(value) else None
        return round(value, digits - 1 - math.floor(math.log10(abs(value))))
    if isinstance(value, dict):
        return {k: _round_floats(v, digits) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_round_floats(v, digits) for v in value]
    return value


def write_text(path: Path, text: str) -> None:
    """Write a file atomically: readers see the old content or the new, never half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp_sibling(path)
    tmp.write_text(text)
    tmp.replace(path)


def write_json(path: Path, data: Any) -> None:
    """Write JSON atomically, floats rounded to 6 significant figures (NaN/inf become null)."""
    write_text(path, json.dumps(_round_floats(data), indent=2, sort_keys=False) + "\n")


def read_json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def iter_files(root: Path) -> Iterator[Path]:
    """Files under `root` (or `root` itself), sorted, skipping caches such as __pycache__."""
    if root.is_file():
        yield root
        return
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in IGNORED_NAMES)
        for name in sorted(filenames):
            yield Path(dirpath) / name


def size_mb(path: Path, exclude: frozenset[str] = frozenset()) -> float:
    """Total size of a file or a directory tree in MB (10^6 bytes), files named in `exclude` left out."""
    return sum(p.stat().st_size for p in iter_files(path) if p.name not in exclude) / 1e6


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def tree_digest(root: Path) -> str:
    """One sha256 over the relative paths and contents of every file under `root`."""
    digest = hashlib.sha256()
    for path in iter_files(root):
        digest.update(str(path.relative_to(root) if root.is_dir() else path.name).encode())
        digest.update(sha256(path).encode())
    return digest.hexdigest()
