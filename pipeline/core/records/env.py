"""The machine the figures belong to (reports/env.json, the env stage's): written by
pipeline.machine.fingerprint, read here only. Benchmarks depend on it, so DVC never replays a
figure measured on other hardware."""

from __future__ import annotations

from pathlib import Path

from pydantic import ConfigDict, Field

from pipeline.core import layout
from pipeline.core.files import read_json, write_json
from pipeline.core.records.base import Part


class Cpu(Part):
    model: str = "unknown"
    vendor: str = "unknown"
    family: str = ""
    model_id: str = ""
    arch: str = ""
    cores: int = 0
    isa: dict[str, bool] = Field(default_factory=dict)  # the instruction-set extensions INT8 / BF16 / FP16 speed needs
    vnni: bool = False
    native_fp16: bool = False


class MachineName(Part):
    """The name the figures are filed under, where it came from, and the fingerprint's hardware class."""

    name: str
    source: str = ""
    hardware: str


class Probe(Part):
    """Whether a target can run here and why not; for a GPU, which one (pipeline.machine.probe)."""

    model_config = ConfigDict(extra="forbid")

    available: bool
    reason: str = ""
    gpu: str | None = None
    driver: str | None = None
    compute_capability: str | None = None
    memory_mb: float | None = None


class Env(Part):
    """The fingerprint of this machine plus its name and the targets probed on it."""

    model_config = ConfigDict(extra="ignore")  # an older revision's extra facts (the gate reads them)

    cpu: Cpu = Field(default_factory=Cpu)
    memory_gib: float | None = None
    gpus: str = "none"
    os: str = ""
    python: str = ""
    packages: dict[str, str | None] = Field(default_factory=dict)
    machine: MachineName | None = None
    targets: dict[str, Probe] = Field(default_factory=dict)

    @property
    def has_gpu(self) -> bool:
        return self.gpus != "none"


def write(env: Env, root: Path = Path(".")) -> None:
    write_json(layout.env_file(root), env.model_dump(mode="json", exclude_none=True))


def load(root: Path = Path(".")) -> Env | None:
    """The machine the figures under `root` were measured on; None before the env stage ran."""
    path = layout.env_file(root)
    return Env.model_validate(read_json(path)) if path.exists() else None
