"""Energy per inference is read from RAPL when the machine exposes it, and otherwise null with
the reason: never an estimate."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.measure.energy import EnergyMeter


def fake_powercap(root: Path, start_uj: int, range_uj: int = 2**32) -> Path:
    zone = root / "intel-rapl:0"
    zone.mkdir(parents=True)
    (zone / "energy_uj").write_text(str(start_uj))
    (zone / "max_energy_range_uj").write_text(str(range_uj))
    (root / "intel-rapl:0:0").mkdir()  # a sub-zone (core): counted inside the package, never twice
    return zone


def test_energy_per_inference_from_the_package_counter(tmp_path):
    zone = fake_powercap(tmp_path, 1_000_000)
    meter = EnergyMeter(tmp_path)
    meter.start()
    (zone / "energy_uj").write_text(str(1_000_000 + 500_000))  # 0.5 J over 1000 calls
    result = meter.stop(1000)
    assert result["mj_per_inference"] == pytest.approx(0.5) and result["joules"] == pytest.approx(0.5)
    assert "every process" in result["scope"]


def test_a_wrapped_counter_still_counts_forward(tmp_path):
    zone = fake_powercap(tmp_path, 999_900, range_uj=1_000_000)
    meter = EnergyMeter(tmp_path)
    meter.start()
    (zone / "energy_uj").write_text("100")  # wrapped: 100 + 100 uJ
    assert meter.stop(1)["joules"] == pytest.approx(200e-6)


def test_no_powercap_gives_null_and_the_reason(tmp_path):
    meter = EnergyMeter(tmp_path / "absent")
    meter.start()
    result = meter.stop(10)
    assert result["mj_per_inference"] is None and "does not exist" in result["reason"]
