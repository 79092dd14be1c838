"""The environment fingerprint is cheap, complete and stable between runs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pipeline.core import registry
from pipeline.core.registry import VARIANTS, Variant
from pipeline.machine import fingerprint as fingerprint_module
from pipeline.machine.fingerprint import fingerprint
from pipeline.stagefile import ENV, GROUPS, SOFTWARE, variant_stages


def test_fingerprint_is_stable_and_names_what_matters():
    first, second = fingerprint(), fingerprint()
    assert first == second
    assert first.cpu.cores >= 1
    with open("/proc/cpuinfo") as cpuinfo:  # the flags as the kernel reports them, read independently
        flags = set(next(line for line in cpuinfo if line.startswith("flags")).split(":")[1].split())
    assert first.cpu.isa == {name: name in flags for name in first.cpu.isa}
    assert first.cpu.isa["avx2"] == ("avx2" in flags)
    assert first.packages["onnxruntime"] != "not installed"
    assert isinstance(first.cpu.vnni, bool)


def test_fingerprint_imports_no_framework():
    code = (
        "import sys, json; from pipeline.machine.fingerprint import fingerprint; fingerprint(); "
        "print(json.dumps(sorted(m for m in ('torch', 'onnxruntime', 'tensorflow', 'jax') if m in sys.modules)))"
    )
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert loaded == []


def group_of(variant: Variant) -> str:
    """The params.yaml list a variant belongs in (pipeline.core.config.load_params enforces it)."""
    return "gpu_variants" if variant.device == "cuda" else "machine_variants" if variant.per_target else "variants"


@pytest.mark.parametrize("name", list(VARIANTS))
def test_upgrading_a_package_a_variant_imports_changes_the_fingerprint_its_stages_depend_on(monkeypatch, name):
    """Each package a variant's pass or runtime imports (onnxruntime-genai for lm_onnx_*, say) is in
    the file its build depends on (software.json for portable builds, env.json for the others) and in
    env.json, which its bench depends on: upgrading it reruns them instead of replaying old figures."""
    variant = VARIANTS[name]
    basis = GROUPS[group_of(variant)]
    stages = variant_stages(name, basis)["stages"]
    assert basis in stages["build"]["do"]["deps"] and ENV in stages["bench"]["do"]["deps"]
    names = {*registry.PACKAGES, *(a for p in registry.PACKAGES.values() for a in p.alternatives)}
    installed = {package: fingerprint_module._version(package) for package in names}
    monkeypatch.setattr(fingerprint_module, "_version", installed.__getitem__)
    written = {SOFTWARE: fingerprint_module.software, ENV: fingerprint}
    before = {path: written[path]() for path in (basis, ENV)}
    assert variant.distributions and set(variant.distributions) >= set(registry.RUNTIMES[variant.runtime].requires)
    for package in variant.distributions:
        upgraded = installed | {package: "99.0"}
        monkeypatch.setattr(fingerprint_module, "_version", upgraded.__getitem__)
        for path in (basis, ENV):
            assert written[path]() != before[path], (package, path)


def test_the_genai_runtimes_are_fingerprinted():
    """The lm_* builds and benches once replayed old figures after an onnxruntime-genai upgrade."""
    assert {"onnxruntime-genai", "openvino-genai"} <= set(fingerprint_module.PACKAGES)
    assert {"onnxruntime-genai", "openvino-genai"} <= set(fingerprint_module.software()["packages"])
