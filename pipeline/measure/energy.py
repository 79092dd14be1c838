"""Energy per inference from Intel/AMD RAPL counters (Linux powercap), where the machine lets us
read them.

RAPL counts the energy of a whole CPU package (every process on it, uncore included), in
microjoules, wrapping at `max_energy_range_uj`. Virtual machines and containers usually hide it
(this project's machine has no /sys/class/powercap at all); then the figure is null with the
reason, never an estimate.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

POWERCAP = Path("/sys/class/powercap")


@dataclass(frozen=True)
class Zone:
    path: Path

    def read_uj(self) -> int:
        return int((self.path / "energy_uj").read_text())

    def range_uj(self) -> int:
        return int((self.path / "max_energy_range_uj").read_text())


def package_zones(root: Path = POWERCAP) -> tuple[list[Zone], str]:
    """The readable package-level RAPL zones (intel-rapl:N, not their sub-zones), or why there are none."""
    if not root.is_dir():
        return [], f"no RAPL: {root} does not exist on this machine (a VM or container without powercap)"
    zones = sorted(p for p in root.glob("intel-rapl:*") if p.name.count(":") == 1)
    if not zones:
        return [], f"no RAPL package zone under {root}"
    try:
        for zone in zones:
            Zone(zone).read_uj()
    except OSError as error:
        return [], f"RAPL counters are not readable here ({error.strerror}: {zone / 'energy_uj'})"
    return [Zone(z) for z in zones], ""


class EnergyMeter:
    """Package energy over an interval: `start()`, run the work, `stop(calls)`."""

    def __init__(self, root: Path = POWERCAP) -> None:
        self.zones, self.reason = package_zones(root)
        self._start: list[int] = []

    def start(self) -> None:
        self._start = [zone.read_uj() for zone in self.zones]

    def stop(self, calls: int) -> dict[str, Any]:
        if not self.zones:
            return {"mj_per_inference": None, "reason": self.reason}
        joules = 0.0
        for zone, begin in zip(self.zones, self._start, strict=True):
            end = zone.read_uj()
            joules += ((end - begin) % zone.range_uj()) / 1e6  # the counter wraps
        return {
            "mj_per_inference": 1000 * joules / calls,
            "joules": joules,
            "calls": calls,
            "scope": f"RAPL package energy, {len(self.zones)} package(s): every process on the CPU counts",
        }
