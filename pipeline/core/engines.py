"""The serving engines' releases and the runtime versions inside them (engine_versions.yaml, with its
sources): a repository written for Triton 25.08 is loaded by ONNX Runtime 1.23.0, not by the version
the pipeline measured with, so the serving step checks the artifact with that version."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import yaml
from pydantic import BaseModel

TABLE = Path(__file__).with_name("engine_versions.yaml")
ENGINES = ("triton", "ovms")


class Release(BaseModel):
    """One engine release: the runtime package versions it loads artifacts with (None: it has none)."""

    engine: str
    name: str  # Triton's container tag (yy.mm), OVMS's release (yyyy.n)
    onnxruntime: str | None = None
    openvino: str | None = None

    @property
    def title(self) -> str:
        return f"{'Triton' if self.engine == 'triton' else 'OVMS'} {self.name}"


@cache
def releases(engine: str) -> dict[str, Release]:
    """The engine's releases in the table, oldest first."""
    table = yaml.safe_load(TABLE.read_text())
    return {
        str(name): Release(engine=engine, name=str(name), **{k: str(v) for k, v in runtimes.items() if k != "server"})
        for name, runtimes in table[engine].items()
    }


def release(engine: str, name: str | None) -> Release:
    """A named release, or the newest in the table; KeyError naming the known ones."""
    known = releases(engine)
    if name is None:
        return list(known.values())[-1]
    if name not in known:
        raise KeyError(f"{engine} release {name!r} is not in {TABLE.name} (known: {', '.join(known)})")
    return known[name]
