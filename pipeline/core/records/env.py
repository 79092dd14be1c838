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
    model: str = "?"
    vendor: str = "?"
    family: str = ""
    model_id: str = ""
    arch: str = ""
    cores: int | None = None
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
    def hardware(self) -> str:
        """CPU model, cores and GPUs, for a heading."""
        gpus = f", GPU {self.gpus}" if self.gpus != "none" else ""
        return f"{self.cpu.model} ({self.cpu.cores or '?'} cores{gpus})"

    @property
    def cpu_id(self) -> str:
        """The CPU's model, family and model number: two figures from different ones do not compare."""
        return f"{self.cpu.model} family {self.cpu.family or '?'} model {self.cpu.model_id or '?'}"

    @property
    def machine_name(self) -> str | None:
        return self.machine.name if self.machine else None


def write(env: Env, root: Path = Path(".")) -> None:
    write_json(layout.env_file(root), env.model_dump(mode="json", exclude_none=True))


def load(root: Path = Path(".")) -> Env | None:
    """The machine the figures under `root` were measured on; None before the env stage ran."""
    path = layout.env_file(root)
    return parse(read_json(path)) if path.exists() else None


def parse(data: object) -> Env:
    """An env.json's content (this revision's, or an older one the gate reads)."""
    return Env.model_validate(data)


def load_env(root: Path = Path(".")) -> Env:
    """As `load`, with every fact unknown ("?") before the env stage ran: for headings."""
    return load(root) or Env()


def machine_name(root: Path = Path(".")) -> str | None:
    """The name of the machine the figures under `root` were measured on; None before the env stage ran."""
    env = load(root)
    return env.machine_name if env else None
