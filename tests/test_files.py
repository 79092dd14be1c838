"""Atomic writes and digests."""

from __future__ import annotations

import json

import pytest

from pipeline.core.files import atomic_dir, size_mb, tree_digest, write_json


def test_atomic_dir_replaces_only_on_success(tmp_path):
    final = tmp_path / "out"
    with atomic_dir(final) as tmp:
        (tmp / "a.txt").write_text("new")
    assert (final / "a.txt").read_text() == "new"
    with pytest.raises(RuntimeError), atomic_dir(final) as tmp:
        (tmp / "b.txt").write_text("half")
        raise RuntimeError("interrupted")
    assert sorted(p.name for p in final.iterdir()) == ["a.txt"]  # old content intact
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no temporary left behind


def test_write_json_rounds_and_nulls_non_finite(tmp_path):
    path = tmp_path / "m.json"
    write_json(path, {"a": 0.123456789, "b": float("nan"), "c": {"d": [1e-9 / 3]}, "e": 0.0})
    data = json.loads(path.read_text())
    assert data == {"a": 0.123457, "b": None, "c": {"d": [3.33333e-10]}, "e": 0.0}
    assert not list(tmp_path.glob(".*tmp*"))


def test_tree_digest_ignores_bytecode_caches(tmp_path):
    (tmp_path / "net.py").write_text("x = 1")
    before = tree_digest(tmp_path)
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "net.cpython-311.pyc").write_bytes(b"\0")
    assert tree_digest(tmp_path) == before
    (tmp_path / "net.py").write_text("x = 2")
    assert tree_digest(tmp_path) != before


def test_size_mb_can_exclude_bookkeeping(tmp_path):
    (tmp_path / "model.bin").write_bytes(b"\0" * 2_000_000)
    (tmp_path / "build.json").write_text("{}")
    assert size_mb(tmp_path, exclude=frozenset({"build.json"})) == pytest.approx(2.0)
