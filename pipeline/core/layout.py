"""Where every file of the pipeline lives; dvc.yaml (pipeline.stagefile) uses the same paths.

One working tree holds one machine's figures (reports/env.json names it); other machines keep
theirs on their own git branches (docs/machines.md).
"""

from __future__ import annotations

from pathlib import Path

ARTIFACTS = Path("artifacts")
REPORTS = Path("reports")
DEPLOY = Path("deploy")
MODELS = Path("models")  # models/<name>/: a model's files; DVC watches the whole folder
MANIFEST = "manifest.json"
PARAMS_FILE = "params.yaml"  # every knob; read by pipeline.core.config only

EXPORTED_ONNX = "model.onnx"
REFERENCE = "reference.npz"
EDGES = "edges.npz"  # a tree ensemble's rows on its split thresholds, with the library's outputs
CALIBRATION = "calib.npz"
VALIDATION = "validation.npz"
SOURCE_INFO = "source.json"
BUILD_INFO = "build.json"
HF_DIR = "hf"  # a decoder's Hugging Face folder, inside its source folder and the artifacts that run it
OV_GENAI_MODEL = "openvino_model.xml"  # the IR name openvino-genai loads from a folder
VARIANT_STAGES = Path("variants")  # variants/<variant>/dvc.yaml: that variant's build and bench stages


def variant_stage_file(variant: str, root: Path = Path(".")) -> Path:
    """The dvc.yaml holding `variant`'s build@<model> and bench@<model> stages (pipeline.stagefile)."""
    return root / VARIANT_STAGES / variant / "dvc.yaml"


def dvc_stage(kind: str, model: str, variant: str) -> str:
    """The DVC name of `model`'s build or bench stage of `variant`, as `dvc repro` takes it."""
    return f"{variant_stage_file(variant).as_posix()}:{kind}@{model}"


def short_name(stage: str) -> str:
    """`variants/<v>/dvc.yaml:build@<m>` -> `build@<m>-<v>`: how logs and the progress line name it."""
    path, _, name = stage.rpartition(":")
    parts = Path(path).parts
    return f"{name}-{parts[1]}" if len(parts) == 3 and parts[0] == VARIANT_STAGES.name and "@" in name else stage


def source_dir(model: str, root: Path = Path(".")) -> Path:
    """Output of the export stage: what every variant of `model` is built from and compared with."""
    return root / ARTIFACTS / model / "source"


def variant_dir(model: str, variant: str, root: Path = Path(".")) -> Path:
    """Output of a build stage: the variant's files plus build.json."""
    return root / ARTIFACTS / model / variant


def metrics_file(model: str, variant: str, root: Path = Path(".")) -> Path:
    return root / REPORTS / "metrics" / model / f"{variant}.json"


def details_file(model: str, variant: str, root: Path = Path(".")) -> Path:
    return details_dir(root) / model / f"{variant}.json"


def details_dir(root: Path = Path(".")) -> Path:
    return root / REPORTS / "details"


def metrics_dir(root: Path = Path(".")) -> Path:
    return root / REPORTS / "metrics"


def profile_file(model: str, variant: str, root: Path = Path(".")) -> Path:
    """Where the time goes in one variant: its top operator types (pipeline.measure.profile)."""
    return profile_dir(root) / model / f"{variant}.json"


def log_file(model: str, variant: str, stage: str, root: Path = Path(".")) -> Path:
    """A failed build's or benchmark's child stderr (kept, not committed)."""
    return root / REPORTS / "logs" / model / f"{variant}.{stage}.log"


def export_report(model: str, root: Path = Path(".")) -> Path:
    return root / REPORTS / "export" / f"{model}.json"


def selection_file(model: str, root: Path = Path(".")) -> Path:
    """The select stage's choice for `model`, a DVC metric (its `chosen` field is a string)."""
    return selection_dir(root) / f"{model}.json"


def deploy_dir(model: str, root: Path = Path(".")) -> Path:
    """The chosen artifact, ready to ship: its files, the model code it needs, manifest.json."""
    return root / DEPLOY / model


def plan_dir(root: Path = Path(".")) -> Path:
    """<variant>.json per variant: its params and its code's hash, what its builds and benches depend on."""
    return root / REPORTS / "plan"


def bench_plan(root: Path = Path(".")) -> Path:
    return root / REPORTS / "bench_plan.json"


def env_file(root: Path = Path(".")) -> Path:
    """This machine's hardware fingerprint and target probes, which every measurement depends on."""
    return root / REPORTS / "env.json"


def software_file(root: Path = Path(".")) -> Path:
    """The software fingerprint the shared stages depend on."""
    return root / REPORTS / "software.json"


def peaks_file(root: Path = Path(".")) -> Path:
    """This machine's measured roofs (the env stage's): only what reads distances depends on it."""
    return root / REPORTS / "peaks.json"


def roofline_dir(root: Path = Path(".")) -> Path:
    return root / REPORTS / "roofline"


def roofline_file(model: str, root: Path = Path(".")) -> Path:
    """Each variant of `model` against its roofline bound, in full (the select stage's)."""
    return roofline_dir(root) / f"{model}.json"


def distance_dir(model: str | None = None, root: Path = Path(".")) -> Path:
    """The DVC metrics of the roofline, one small file per variant: reports/distance/<model>/<variant>.json."""
    folder = root / REPORTS / "distance"
    return folder / model if model else folder


def model_dir(name: str, root: Path = Path(".")) -> Path:
    """Every model has a folder models/<name>/ holding its files; DVC watches the whole folder."""
    return root / MODELS / name


def train_report(model: str, root: Path = Path(".")) -> Path:
    """A zoo model's training record (the train stage's)."""
    return root / REPORTS / "train" / f"{model}.json"


def plan_file(variant: str, root: Path = Path(".")) -> Path:
    """A variant's params and code hash (the plan stage's), which its builds and benches depend on."""
    return plan_dir(root) / f"{variant}.json"


def profile_dir(root: Path = Path(".")) -> Path:
    return root / REPORTS / "profile"


def selection_dir(root: Path = Path(".")) -> Path:
    return root / REPORTS / "selection"


def report_dir(root: Path = Path(".")) -> Path:
    """The report stage's Markdown and PNG (reports/report/index.md and one page per model)."""
    return root / REPORTS / "report"


def plots_dir(root: Path = Path(".")) -> Path:
    """The report stage's plot data, which `dvc plots show` draws."""
    return root / REPORTS / "plots"


def stage_logs(root: Path = Path(".")) -> Path:
    """Each DVC stage's output, one file per stage run."""
    return root / REPORTS / "logs" / "stages"


def repro_log(root: Path = Path(".")) -> Path:
    """`python -m pipeline repro`'s whole `dvc repro` output."""
    return root / REPORTS / "logs" / "repro.log"


def repro_time(root: Path = Path(".")) -> Path:
    """`python -m pipeline repro`'s wall clock by stage kind (pipeline.progress.time_by_kind)."""
    return root / REPORTS / "logs" / "repro_time.json"
