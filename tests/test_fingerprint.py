"""The environment fingerprint is cheap, complete and stable between runs."""

from __future__ import annotations

import json
import subprocess
import sys

from pipeline.machine.fingerprint import fingerprint


def test_fingerprint_is_stable_and_names_what_matters():
    first, second = fingerprint(), fingerprint()
    assert first == second
    assert first["cpu"]["cores"] >= 1
    with open("/proc/cpuinfo") as cpuinfo:  # the flags as the kernel reports them, read independently
        flags = set(next(line for line in cpuinfo if line.startswith("flags")).split(":")[1].split())
    assert first["cpu"]["isa"] == {name: name in flags for name in first["cpu"]["isa"]}
    assert first["cpu"]["isa"]["avx2"] == ("avx2" in flags)
    assert first["packages"]["onnxruntime"] != "not installed"
    assert isinstance(first["cpu"]["vnni"], bool)


def test_fingerprint_imports_no_framework():
    code = (
        "import sys, json; from pipeline.machine.fingerprint import fingerprint; fingerprint(); "
        "print(json.dumps(sorted(m for m in ('torch', 'onnxruntime', 'tensorflow', 'jax') if m in sys.modules)))"
    )
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert loaded == []
