"""Machine classes: every kind of hardware that benchmarks writes its results in machines/<name>/.

Figures belong to the hardware they were measured on, so each machine class has its own DVC
pipeline (machines/<name>/dvc.yaml and env/dvc.yaml, the same templates for all, its name in machine.yaml),
its own dvc.lock and its own results. Two machines committing results touch disjoint files, and
`dvc metrics diff --targets machines/<name>/reports/metrics -R` compares one machine across revisions.

A machine's name comes from the environment: MODELOPT_MACHINE when set (a CI runner's label),
else it is derived from the hardware fingerprint (CPU vendor, family, model, cores; GPU models).
It is never guessed, and a machine folder refuses stages run on other hardware, so a benchmark
measured on one machine class is never replayed onto another.
"""

from __future__ import annotations

import os
import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

from pipeline import layout
from pipeline.errors import ConfigError

MACHINE_VARS = "machine.yaml"  # the machine's name, read by its dvc.yaml as `${machine}`
# The pipeline files of every machine folder and their templates: the pipeline, and its always-run
# env stage in a file of its own (a small lock to rewrite on every run).
TEMPLATES = {"dvc.yaml": "machine_dvc.yaml", "env/dvc.yaml": "machine_env_dvc.yaml"}
ENV_VAR = "MODELOPT_MACHINE"
NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
VENDORS = {"GenuineIntel": "intel", "AuthenticAMD": "amd"}


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def hardware_name(fingerprint: dict[str, Any]) -> str:
    """The machine class of a fingerprint (pipeline.fingerprint): CPU vendor-family-model, cores,
    then each GPU model, e.g. `intel-6-167-2c` or `amd-25-17-16c-nvidia-h100-80gb-hbm3`."""
    cpu = fingerprint["cpu"]
    vendor = VENDORS.get(cpu["vendor"], _slug(cpu["vendor"]))
    if cpu.get("family") and cpu.get("model_id"):
        parts = [vendor, cpu["family"], cpu["model_id"]]
    else:  # no x86 family/model numbers (Arm, say): the model name
        parts = [vendor, _slug(cpu["model"])]
    parts.append(f"{cpu['cores']}c")
    gpus = Counter(g.strip() for g in fingerprint.get("gpus", "none").split(",") if g.strip() != "none")
    parts += [(f"{n}x-" if n > 1 else "") + _slug(gpu) for gpu, n in sorted(gpus.items())]
    return "-".join(p for p in parts if p)[:64].rstrip("-")


def check_name(name: str, source: str) -> str:
    if not NAME_PATTERN.match(name):
        raise ConfigError(f"{source}: machine name {name!r}: use 1-64 of a-z, 0-9, '.', '_', '-', starting alnum")
    return name


def current() -> dict[str, str]:
    """This machine: {name, source, hardware}. `hardware` is always the fingerprint's class."""
    from pipeline.fingerprint import fingerprint

    hardware = hardware_name(fingerprint())
    if os.environ.get(ENV_VAR):
        return {"name": check_name(os.environ[ENV_VAR], ENV_VAR), "source": ENV_VAR, "hardware": hardware}
    return {"name": hardware, "source": "fingerprint", "hardware": hardware}


def known(root: Path = Path(".")) -> list[str]:
    """Machine classes with a pipeline in this repository."""
    folder = root / layout.MACHINES
    return sorted(p.parent.name for p in folder.glob(f"*/{MACHINE_VARS}")) if folder.is_dir() else []


def require_here(name: str, root: Path = Path(".")) -> dict[str, str]:
    """Refuse to run machine `name`'s stages anywhere but on that machine class: the name must be
    this machine's, and hardware already recorded under it must be this hardware."""
    from pipeline.files import read_json

    here = current()
    if here["name"] != name:
        raise ConfigError(
            f"machines/{name}/dvc.yaml: measures machine {name!r}; this is {here['name']!r} "
            f"(from {here['source']}): run `python -m pipeline repro` for this machine's pipeline"
        )
    env = layout.env_file(layout.machine_root(name, root))
    recorded = read_json(env).get("machine", {}).get("hardware") if env.exists() else None
    if recorded and recorded != here["hardware"]:
        raise ConfigError(
            f"{env}: machine.hardware: {name!r} was measured on {recorded}, this is {here['hardware']}: "
            f"set {ENV_VAR} to another name for this hardware"
        )
    return here


def results_of(machine: str | None, root: Path = Path(".")) -> tuple[str, Path]:
    """(name, folder) of the machine whose figures to show: `machine`, else this one. Figures of
    one machine are never shown as another's: without results here, the error names those there are."""
    name = machine or current()["name"]
    results = layout.machine_root(name, root)
    if not layout.metrics_dir(results).is_dir():
        others = ", ".join(known(root)) or "none"
        raise ConfigError(
            f"{results}: no results for machine {name!r} (machines with results: {others}): "
            "run `python -m pipeline repro` here, or pass --machine NAME or --machines"
        )
    return name, results


def init(name: str, root: Path = Path(".")) -> Path:
    """machines/<name>/ with the pipeline templates and its name; idempotent. Returns its dvc.yaml."""
    folder = layout.machine_root(check_name(name, "machine"), root)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MACHINE_VARS).write_text(f"# This machine class's name (pipeline.machines).\nmachine: {name}\n")
    for target, template in TEMPLATES.items():
        (folder / target).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(Path(__file__).with_name(template), folder / target)
    return folder / "dvc.yaml"


def write_env(machine: str, params: Any, root: Path = Path(".")) -> dict[str, Any]:
    """A machine's env stage: its fingerprint, name and a probe of each configured target, to
    machines/<name>/reports/env.json, which its builds and benchmarks depend on. Refuses to run
    on another machine class (require_here)."""
    from pipeline.files import write_json
    from pipeline.fingerprint import fingerprint
    from pipeline.target_probe import probe_all

    here = require_here(machine, root)
    probes = probe_all(params.targets)
    env = fingerprint() | {"machine": here, "targets": probes}
    write_json(layout.env_file(layout.machine_root(machine, root)), env)
    usable = [name for name, probe in probes.items() if probe["available"]]
    return {"status": "ok", "reason": f"{machine}; targets usable here: {', '.join(usable) or 'none'}"}
