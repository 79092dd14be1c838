"""A cached virtual environment holding one runtime package at one version (onnxruntime==1.23.0): the
runtime inside an engine release, to load an artifact with before a repository says that engine serves
it. Made by pip from the package index once per machine (about 20 s), then reused by every project.

Where: $MODELOPT_RUNTIMES, else $XDG_CACHE_HOME/modelopt-pipeline/runtimes, else ~/.cache/... . A half-made
environment never stays: it is built in a temporary folder and renamed into place, under a file lock
(two stages, or two test workers, may ask for the same one).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from pipeline.core.errors import Unavailable

PIP_TIMEOUT_S = 600


def cache_root() -> Path:
    if root := os.environ.get("MODELOPT_RUNTIMES"):
        return Path(root)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "modelopt-pipeline" / "runtimes"


def runtime_python(package: str, version: str) -> Path:
    """The interpreter of an environment with `package==version` and numpy; Unavailable (one line) when
    pip cannot make it here (no index, no wheel for this Python)."""
    tag = f"py{sys.version_info.major}{sys.version_info.minor}"
    root = cache_root()
    folder = root / f"{package}-{version}-{tag}"
    python = folder / "bin" / "python"
    if python.exists():
        return python
    root.mkdir(parents=True, exist_ok=True)
    with (root / f".{folder.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if python.exists():  # made while this process waited
            return python
        building = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=root))
        try:
            subprocess.run([sys.executable, "-m", "venv", str(building)], check=True, capture_output=True)
            pip = [str(building / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
            done = subprocess.run(
                [*pip, f"{package}=={version}", "numpy"], capture_output=True, text=True, timeout=PIP_TIMEOUT_S
            )
            if done.returncode != 0:
                last = (done.stderr.strip().splitlines() or ["pip failed"])[-1]
                raise Unavailable(f"pip could not install {package}=={version} here: {last}")
            building.rename(folder)  # its scripts name the old folder; only `python -m` is used
        except subprocess.TimeoutExpired:
            raise Unavailable(f"pip took over {PIP_TIMEOUT_S} s to install {package}=={version}") from None
        finally:
            shutil.rmtree(building, ignore_errors=True)
    return python
