"""The artifact's files in a repository's version folder: placed from the deploy folder, and checked
against the manifest's sha256."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from pipeline.core.files import sha256
from pipeline.core.records.manifest import Manifest

VERSION = "1"  # Triton and OVMS serve numbered version folders; the deploy folder holds one version


def artifact_files(manifest: Manifest) -> list[str]:
    """The files the engine loads: the manifest's, less the tokenizer a client tokenizes with."""
    tokenizer = f"{manifest.text.tokenizer}/" if manifest.text else None
    return sorted(name for name in manifest.files if not (tokenizer and name.startswith(tokenizer)))


def place(folder: Path, manifest: Manifest, version_dir: Path) -> list[str]:
    """Hard-link (copy where the file system cannot) each artifact file into `version_dir`."""
    names = artifact_files(manifest)
    for name in names:
        target = version_dir / name
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(folder / name, target)
        except OSError:
            shutil.copy2(folder / name, target)
    return names


def file_problems(version_dir: Path, manifest: Manifest, shown: str) -> list[str]:
    """Each artifact file present in `version_dir` with the manifest's sha256 (`shown`: how messages
    name the folder)."""
    problems = []
    for name in artifact_files(manifest):
        path = version_dir / name
        if not path.is_file():
            problems.append(f"{shown}/{name}: missing (manifest files.{name})")
        elif sha256(path) != manifest.files[name]:
            problems.append(f"{shown}/{name}: sha256 differs from the manifest's files.{name}")
    return problems
