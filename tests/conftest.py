"""Shared fixtures: a tiny PyTorch model in a project layout, and its checked ONNX export."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import yaml

from pipeline.core.config import ModelConfig
from tests.helpers import write_source

REPO = Path(__file__).resolve().parents[1]

# The test projects' env stages share one cache of this machine's roofs (pipeline.measure.peaks), kept apart
# from the user's, and cache them whatever else runs: a test asserts that roofs were measured and used, never
# their size, and measuring them in each project would add 5 s to every one.
os.environ.setdefault("MODELOPT_PEAKS_CACHE", str(Path(tempfile.gettempdir()) / f"modelopt-test-peaks-{os.getuid()}"))
os.environ.setdefault("MODELOPT_PEAKS_QUIET_PCT", "inf")

if WORKER := os.environ.get("PYTEST_XDIST_WORKER"):
    # Each test worker gets its own temp folder, so its own machine lock (pipeline.machine.lock): one
    # worker's project never waits for the other's builds. Their figures disturb each other: tests assert
    # on what a run wrote, never on how fast it ran (benchmarks/ measure, alone).
    os.environ["TMPDIR"] = str(Path(tempfile.gettempdir()) / f"modelopt-tests-{WORKER}")
    Path(os.environ["TMPDIR"]).mkdir(exist_ok=True)
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again

# The files that build a real DVC project, longest first: under --dist loadfile (pyproject.toml) a worker
# takes a whole file, in this order, so the longest starts at once and the short files fill the other worker.
PROJECT_FILES = ["test_e2e.py", "test_generation.py", "test_e2e_add.py", "test_e2e_frameworks.py",
                 "test_machines.py"]  # fmt: skip


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: PROJECT_FILES.index(item.path.name) if item.path.name in PROJECT_FILES else 99)


TINY_NET = textwrap.dedent(
    """
    import torch
    from torch import nn


    def build(hidden: int = 16) -> nn.Module:
        return nn.Sequential(nn.Linear(12, hidden), nn.ReLU(), nn.Linear(hidden, 3))
    """
)


def tiny_config(**overrides) -> ModelConfig:
    data = {
        "source": "torch",
        "factory": "models.tiny.net:build",
        "file": "weights.pt",
        "inputs": {"x": {"shape": ["batch", 12]}},
        "eval_data": "eval.npz",
        "metric": "accuracy",
    }
    return ModelConfig.model_validate(data | overrides)


def write_tiny_model(root: Path, name: str = "tiny", seed: int = 0) -> Path:
    """models/<name>/ with net.py, random weights and a labelled eval.npz (labels = source argmax)."""
    import torch

    folder = root / "models" / name
    folder.mkdir(parents=True, exist_ok=True)
    (root / "models" / "__init__.py").touch()
    (folder / "net.py").write_text(TINY_NET)
    torch.manual_seed(seed)
    module = torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    torch.save(module.state_dict(), folder / "weights.pt")
    x = np.random.default_rng(seed).standard_normal((64, 12)).astype(np.float32)
    with torch.no_grad():
        labels = module(torch.from_numpy(x)).argmax(1).numpy()
    labels[:8] = (labels[:8] + 1) % 3  # a source accuracy below 1, so deltas are meaningful
    np.savez(folder / "eval.npz", x=x, labels=labels)
    return folder


def _forget_models_package() -> None:
    for module in [m for m in sys.modules if m == "models" or m.startswith("models.")]:
        del sys.modules[module]


@contextmanager
def models_from(root: Path) -> Iterator[None]:
    """Make `import models.*` resolve in `root` (a test project), not in this repository."""
    _forget_models_package()
    sys.path.insert(0, str(root))
    try:
        yield
    finally:
        sys.path.remove(str(root))
        _forget_models_package()


@pytest.fixture
def tiny_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A working directory holding models/tiny/; imports of models.* resolve inside it."""
    write_tiny_model(tmp_path)
    record_this_machine(tmp_path)
    monkeypatch.chdir(tmp_path)
    with models_from(tmp_path):
        yield tmp_path


@pytest.fixture(scope="session")
def tiny_onnx(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model exported by the real export code (dynamo, dynamic batch)."""
    from pipeline.core.config import ExportConfig
    from pipeline.prepare.sources.pytorch import TorchSource

    root = tmp_path_factory.mktemp("tiny_export")
    write_tiny_model(root, name="tiny_export")
    with models_from(root):
        source = TorchSource("tiny_export", tiny_config(factory="models.tiny_export.net:build"), root)
        path = root / "model.onnx"
        source.export_onnx(path, ExportConfig())
    return path


@pytest.fixture
def context(tmp_path: Path, tiny_onnx: Path):
    """A build context whose source folder holds the export, labelled reference data and calibration data."""
    import onnxruntime as ort

    from pipeline.core import layout
    from pipeline.core.data import DataSet, generate_inputs
    from pipeline.optimize.passes.base import BuildContext

    config = tiny_config()
    source = layout.source_dir("tiny", tmp_path)
    source.mkdir(parents=True)
    shutil.copy(tiny_onnx, source / layout.EXPORTED_ONNX)
    inputs = generate_inputs(config.inputs, 64, seed=0)
    outputs = ort.InferenceSession(str(tiny_onnx), providers=["CPUExecutionProvider"]).run(None, inputs)[0]
    labels = outputs.argmax(1)
    labels[:6] = (labels[:6] + 1) % 3
    DataSet(inputs, {"output": outputs}, labels).save(source / layout.REFERENCE)
    DataSet(generate_inputs(config.inputs, 40, seed=1), origin="test").save(source / layout.CALIBRATION)
    held_out = generate_inputs(config.inputs, 48, seed=2)  # validation rows: neither scoring nor calibration
    session = ort.InferenceSession(str(tiny_onnx), providers=["CPUExecutionProvider"])
    held_out_outputs = session.run(None, held_out)[0]
    DataSet(held_out, {"output": held_out_outputs}, held_out_outputs.argmax(1), "validation").save(
        source / layout.VALIDATION
    )
    write_source(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    return BuildContext("tiny", config, tmp_path, out)


def torch_build_context(project: Path, output_names: tuple[str, ...] = ("output",)):
    """A build context for the tiny torch model in `project`: its source folder records the output
    names and holds eval inputs (enough for passes that start from the PyTorch module and take
    their example inputs from the eval rows, not from the export)."""
    from pipeline.core import layout
    from pipeline.core.data import DataSet, generate_inputs
    from pipeline.optimize.passes.base import BuildContext

    source = layout.source_dir("tiny", project)
    source.mkdir(parents=True)
    write_source(project, output_names=list(output_names))
    DataSet(generate_inputs(tiny_config().inputs, 8, seed=0)).save(source / layout.REFERENCE)
    out = project / "out"
    out.mkdir()
    return BuildContext("tiny", tiny_config(), project, out)


def build(ctx, name: str, **params):
    """Run variant `name`'s pass in this process with `params` as its params.yaml section."""
    import dataclasses

    from pipeline.optimize.knobs import pass_class, validate_variant_params

    return pass_class(name)().run(dataclasses.replace(ctx, variant=name), validate_variant_params(name, params))


def copy_project(destination: Path) -> Path:
    """The repository's pipeline code and config, without artifacts, venv or git history."""
    ignore = shutil.ignore_patterns(
        ".venv",
        ".git",
        "artifacts",
        "deploy",
        "__pycache__",
        ".pytest_cache",
        "trained",
        ".dvc",
        "dvc.lock",
        "reports",
        "machines",
        ".gpucheck",
        ".devcheck",
        ".whl",
    )
    shutil.copytree(REPO, destination, ignore=ignore, dirs_exist_ok=True)
    return destination


def write_params(root: Path, params: dict) -> None:
    """A copied project's params.yaml, and the pipeline files its variant lists call for (as a user
    runs `python -m pipeline stages --write` after editing them)."""
    from pipeline.stagefile import check_or_write

    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    check_or_write(root, write=True)


def fixed_batch_cnn():
    """A small CNN whose forward bakes the batch of 1 into a Reshape, as exporters do."""
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.head = nn.Linear(8 * 4 * 4, 5)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.nn.functional.adaptive_avg_pool2d(torch.relu(self.conv(x)), 4)
            return self.head(y.reshape(1, -1))

    torch.manual_seed(0)
    return Net().eval()


def write_fixed_batch_onnx(folder: Path) -> Path:
    """An ONNX file as other exporters write them: batch fixed to 1, a Reshape to [1, 128] baked
    in, weights in an external data file (model.onnx + model.onnx.data)."""
    import onnx
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    scratch = folder / "scratch.onnx"
    torch.onnx.export(fixed_batch_cnn(), (torch.randn(1, 3, 16, 16),), str(scratch), input_names=["image"],
                      output_names=["scores"], opset_version=17, dynamo=False)  # fmt: skip
    model = onnx.load(str(scratch))
    scratch.unlink()
    onnx.save_model(model, str(folder / "model.onnx"), save_as_external_data=True, location="model.onnx.data",
                    size_threshold=0)  # fmt: skip
    return folder / "model.onnx"


@pytest.fixture(scope="session")
def fixed_batch_onnx(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_fixed_batch_onnx(tmp_path_factory.mktemp("fixed_batch"))


@pytest.fixture
def stage_project(tmp_path: Path) -> Path:
    """A project root whose `tiny` model has an ok export record: enough for the build and bench
    stages' bookkeeping (skips, failures) without running a pass."""
    from pipeline.core import layout

    source = layout.source_dir("tiny", tmp_path)
    source.mkdir(parents=True)
    write_source(tmp_path)
    record_this_machine(tmp_path)
    return tmp_path


def record_this_machine(root: Path) -> None:
    """reports/env.json as the env stage writes it here (with the cpu target): bench stages need it."""
    from pipeline.core.records import env
    from pipeline.machine.naming import current

    env.write(env.Env(machine=current(), targets={"cpu": env.Probe(available=True)}), root)


@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch) -> str:
    """This machine's class name for the test (MODELOPT_MACHINE)."""
    monkeypatch.setenv("MODELOPT_MACHINE", "box")
    return "box"


HF_WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a", "good", "bad", "film", "was", "is", "not",
            "very", "great", "awful"]  # fmt: skip


def write_hf_folder(folder: Path, architecture: str = "BertModel") -> Path:
    """A tiny Hugging Face folder built offline with save_pretrained from a seeded config: a BERT
    (`BertModel`, `BertForSequenceClassification` with labels neg/pos) with its tokenizer, or a ViT
    (`ViTForImageClassification`, 16x16 images, 3 classes)."""
    import torch
    import transformers

    torch.manual_seed(0)
    folder.mkdir(parents=True, exist_ok=True)
    if architecture.startswith("ViT"):
        config = transformers.ViTConfig(image_size=16, patch_size=8, hidden_size=32, num_hidden_layers=1,
                                        num_attention_heads=2, intermediate_size=64, num_labels=3,
                                        architectures=[architecture])  # fmt: skip
        getattr(transformers, architecture)(config).save_pretrained(folder)
        return folder
    config = transformers.BertConfig(vocab_size=len(HF_WORDS), hidden_size=32, num_hidden_layers=1,
                                     num_attention_heads=2, intermediate_size=64, max_position_embeddings=64,
                                     num_labels=2, id2label={0: "neg", 1: "pos"}, label2id={"neg": 0, "pos": 1},
                                     architectures=[architecture])  # fmt: skip
    getattr(transformers, architecture)(config).save_pretrained(folder)
    transformers.BertTokenizer(vocab={word: i for i, word in enumerate(HF_WORDS)}).save_pretrained(folder)
    return folder


def write_sklearn_onnx(folder: Path) -> tuple[Path, Path]:
    """A scikit-learn RandomForest on iris exported by skl2onnx with its defaults (a TreeEnsembleClassifier,
    an int64 label and the probabilities as a ZipMap), and an .npz of its held-out rows with labels."""
    from skl2onnx import to_onnx
    from sklearn.datasets import load_iris
    from sklearn.ensemble import RandomForestClassifier

    features, labels = load_iris(return_X_y=True)
    features = features.astype(np.float32)
    forest = RandomForestClassifier(n_estimators=8, max_depth=4, random_state=0).fit(features[1::2], labels[1::2])
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "forest.onnx").write_bytes(to_onnx(forest, features[:1]).SerializeToString())
    np.savez(folder / "iris.npz", X=features[::2], labels=labels[::2])
    return folder / "forest.onnx", folder / "iris.npz"
