"""Where every file of the pipeline lives; the dvc.yaml files use the same paths.

Shared files (train, export, portable builds) sit under the project root; each machine's own
(its builds, figures, choice and report) under machines/<name>/, laid out the same way: the
functions below take that folder as `root` (machine_root).
"""

from __future__ import annotations

from pathlib import Path

MACHINES = Path("machines")
ARTIFACTS = Path("artifacts")
REPORTS = Path("reports")
DEPLOY = Path("deploy")
MANIFEST = "manifest.json"

EXPORTED_ONNX = "model.onnx"
REFERENCE = "reference.npz"
CALIBRATION = "calib.npz"
VALIDATION = "validation.npz"
SOURCE_INFO = "source.json"
BUILD_INFO = "build.json"


def source_dir(model: str, root: Path = Path(".")) -> Path:
    """Output of the export stage: what every variant of `model` is built from and compared with."""
    return root / ARTIFACTS / model / "source"


def variant_dir(model: str, variant: str, root: Path = Path(".")) -> Path:
    """Output of a build stage: the variant's files plus build.json."""
    return root / ARTIFACTS / model / variant


def machine_root(machine: str, root: Path = Path(".")) -> Path:
    """Everything one machine class writes (pipeline.machines): never shared with another."""
    return root / MACHINES / machine


def built_dir(model: str, variant: str, machine_built: bool, machine: str, root: Path = Path(".")) -> Path:
    """A variant's artifact: shared (variants) or built on `machine` (machine_variants)."""
    return variant_dir(model, variant, machine_root(machine, root) if machine_built else root)


def metrics_file(model: str, variant: str, root: Path = Path(".")) -> Path:
    return root / REPORTS / "metrics" / model / f"{variant}.json"


def details_file(model: str, variant: str, root: Path = Path(".")) -> Path:
    return root / REPORTS / "details" / model / f"{variant}.json"


def metrics_dir(root: Path = Path(".")) -> Path:
    return root / REPORTS / "metrics"


def profile_file(model: str, variant: str, root: Path = Path(".")) -> Path:
    """Where the time goes in one variant: its top operator types (pipeline.bench.profile)."""
    return root / REPORTS / "profile" / model / f"{variant}.json"


def log_file(model: str, variant: str, stage: str, root: Path = Path(".")) -> Path:
    """A failed build's or benchmark's child stderr (kept, not committed)."""
    return root / REPORTS / "logs" / model / f"{variant}.{stage}.log"


def export_report(model: str, root: Path = Path(".")) -> Path:
    return root / REPORTS / "export" / f"{model}.json"


def selection_file(model: str, root: Path = Path(".")) -> Path:
    """The select stage's choice for `model`, a DVC metric (its `chosen` field is a string)."""
    return root / REPORTS / "selection" / f"{model}.json"


def deploy_dir(model: str, root: Path = Path(".")) -> Path:
    """The chosen artifact, ready to ship: its files, the model code it needs, manifest.json."""
    return root / DEPLOY / model


def variant_plan_dir(root: Path = Path(".")) -> Path:
    """<variant>.json per variant: its `variants.<name>` params, what its build stages depend on."""
    return root / REPORTS / "variant_plan"


def bench_plan(root: Path = Path(".")) -> Path:
    return root / REPORTS / "bench_plan.json"


def env_file(root: Path = Path(".")) -> Path:
    """A machine's hardware fingerprint and target probes (root: its machine_root)."""
    return root / REPORTS / "env.json"


def software_file(root: Path = Path(".")) -> Path:
    """The software fingerprint the shared stages depend on."""
    return root / REPORTS / "software.json"
