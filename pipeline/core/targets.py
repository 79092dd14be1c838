"""Targets: the hardware a variant is built for and measured on (`targets:` in params.yaml).

A target is `cpu` or `cuda:N` (`cuda` means `cuda:0`). Each variant declares the device kind it
runs on (pipeline.core.registry); a run measures a variant on the first configured target of its kind.
Whether a target is usable here is probed by pipeline.machine.probe.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PATTERN = re.compile(r"^(cpu|cuda)(?::(\d+))?$")


@dataclass(frozen=True)
class Target:
    kind: str
    index: int = 0

    @classmethod
    def parse(cls, name: str) -> Target:
        match = PATTERN.match(name.strip())
        if not match or (match[1] == "cpu" and match[2] is not None):
            raise ValueError(f"unknown target {name!r} (known: cpu, cuda, cuda:N)")
        return cls(match[1], int(match[2] or 0))

    def __str__(self) -> str:
        return self.kind if self.kind == "cpu" else f"{self.kind}:{self.index}"


def target_for(kind: str, targets: list[str]) -> str | None:
    """The configured target a variant of device `kind` runs on: the first of that kind."""
    return next((name for name in map(str, map(Target.parse, targets)) if Target.parse(name).kind == kind), None)
