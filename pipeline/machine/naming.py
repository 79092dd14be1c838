"""Machine classes: the hardware a working tree's figures belong to.

A working tree holds one machine's figures (reports/env.json records its name and hardware).
Each machine class keeps its own on a git branch `results/<name>`; main carries the reference
machine's (docs/machines.md). Benchmarks depend on env.json, so DVC never replays a figure
measured on other hardware, and a bench stage run by hand refuses a stale env.json.

A machine's name comes from the environment: MODELOPT_MACHINE when set (a CI runner's label),
else it is derived from the hardware fingerprint (CPU vendor, family, model, cores; GPU models).
"""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

from pipeline.core import layout
from pipeline.core.errors import ConfigError
from pipeline.core.records import env as records_env
from pipeline.core.records.env import Env, MachineName

BRANCH_PREFIX = "results/"  # each machine class's figures: git branch results/<name>
ENV_VAR = "MODELOPT_MACHINE"
NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
VENDORS = {"GenuineIntel": "intel", "AuthenticAMD": "amd"}


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def hardware_name(fingerprint: Env) -> str:
    """The machine class of a fingerprint (pipeline.machine.fingerprint): CPU vendor-family-model, cores,
    then each GPU model, e.g. `intel-6-167-2c` or `amd-25-17-16c-nvidia-h100-80gb-hbm3`."""
    cpu = fingerprint.cpu
    vendor = VENDORS.get(cpu.vendor, _slug(cpu.vendor))
    # no x86 family/model numbers (Arm, say): the model name
    parts = [vendor, cpu.family, cpu.model_id] if cpu.family and cpu.model_id else [vendor, _slug(cpu.model)]
    parts.append(f"{cpu.cores}c")
    gpus = Counter(g.strip() for g in fingerprint.gpus.split(",") if g.strip() != "none")
    parts += [(f"{n}x-" if n > 1 else "") + _slug(gpu) for gpu, n in sorted(gpus.items())]
    return "-".join(p for p in parts if p)[:64].rstrip("-")


def check_name(name: str, source: str) -> str:
    if not NAME_PATTERN.match(name):
        raise ConfigError(f"{source}: machine name {name!r}: use 1-64 of a-z, 0-9, '.', '_', '-', starting alnum")
    return name


def current() -> MachineName:
    """This machine: its name, where the name came from, and the fingerprint's hardware class."""
    from pipeline.machine.fingerprint import fingerprint

    hardware = hardware_name(fingerprint())
    if os.environ.get(ENV_VAR):
        return MachineName(name=check_name(os.environ[ENV_VAR], ENV_VAR), source=ENV_VAR, hardware=hardware)
    return MachineName(name=hardware, source="fingerprint", hardware=hardware)


def require_same_hardware(root: Path = Path(".")) -> MachineName:
    """This machine, refusing when reports/env.json (what the measurements depend on) was written on
    other hardware: `dvc repro` reruns the env stage first; a stage run by hand does not."""
    here = current()
    env = records_env.load(root)
    recorded = env.machine.hardware if env and env.machine else None
    if recorded != here.hardware:
        raise ConfigError(
            f"{layout.env_file(root)}: machine.hardware: {recorded or 'missing'}, this is {here.hardware}: "
            "run `dvc repro` (its env stage records this machine first)"
        )
    return here


def write_env(params: Any, root: Path = Path(".")) -> dict[str, Any]:
    """The env stage (always run): reports/software.json (library versions, what the portable builds
    depend on) and reports/env.json (this machine's fingerprint, name and a probe of each configured
    target, what its own builds and every benchmark depend on). One stage writes both: each
    always-run stage costs a process start on every `dvc repro`."""
    from pipeline.core.files import write_json
    from pipeline.machine.fingerprint import fingerprint, software
    from pipeline.machine.probe import probe_all

    here = current()
    probes = probe_all(params.targets)
    write_json(layout.software_file(root), software())
    records_env.write(fingerprint().model_copy(update={"machine": here, "targets": probes}), root)
    usable = [name for name, probe in probes.items() if probe.available]
    return {"status": "ok", "reason": f"{here.name}; targets usable here: {', '.join(usable) or 'none'}"}
