"""A deployment's description (deploy/<model>/manifest.json), written by the select stage and read by
`predict` on a deploy machine, here only: what the artifact is, how to load and feed it, the figures it
was chosen on, the sha256 of every file, and why it won."""

from __future__ import annotations

from pathlib import Path

from pydantic import ConfigDict, Field

from pipeline.core import layout
from pipeline.core.config import InputSpec
from pipeline.core.errors import ModelFileError
from pipeline.core.files import read_json, write_json
from pipeline.core.records.base import Part
from pipeline.core.records.build import BuildFacts, RuntimeConfig
from pipeline.core.records.env import Env
from pipeline.core.records.roofline import Distance
from pipeline.core.records.variant import VariantRecord


class SourceFacts(Part):
    """Where the model came from and what its outputs mean."""

    kind: str
    metric: str
    task: str | None = None


class TextFacts(Part):
    """A Hugging Face text model's tokenizer (copied beside the artifact) and label names."""

    task: str
    tokenizer: str
    labels: dict[str, str] | None = None  # config.json's id2label


class Explanation(Part):
    """Why the artifact won and every other variant did not (pipeline.decide.deploy)."""

    model_config = ConfigDict(extra="allow")

    why: str = ""


class Manifest(Part):
    """One model's deployment; `variant` None when nothing met the constraints (`selection.why`)."""

    model: str
    variant: str | None
    machine: str
    runtime: str = ""
    runtime_version: str = ""
    precision: str = ""  # as executed on the machine it was measured on
    precision_declared: str = ""
    device: str = "cpu"  # where it was measured; predict loads it there
    entry: str = ""
    runtime_config: RuntimeConfig = Field(default_factory=RuntimeConfig)
    code: str | None = None  # the folder holding a factory's code (torch_eager, jax_jit)
    inputs: dict[str, InputSpec] = Field(default_factory=dict)  # symbolic dimensions take any size
    token_bounds: dict[str, int] = Field(default_factory=dict)  # each token input's vocabulary: predict checks ids
    fixed_batch: int | None = None  # a fixed batch is padded to
    dims: dict[str, int] = Field(default_factory=dict)  # the values the metrics were measured at
    outputs: list[str] = Field(default_factory=list)
    source: SourceFacts | None = None
    context: int | None = None  # text generation: the context length and the end-of-text token
    eos_token_id: int | None = None
    text: TextFacts | None = None
    metrics: VariantRecord | None = None
    build: BuildFacts | None = None
    files: dict[str, str] = Field(default_factory=dict)  # path: sha256
    selection: Explanation = Field(default_factory=Explanation)
    roofline: Distance | None = None  # how far the artifact is from this CPU's limit, and what bounds it
    environment: Env | None = None
    pipeline_version: str = ""


def write(manifest: Manifest, folder: Path) -> None:
    """Into the deploy folder being written (renamed into place when the select stage ends)."""
    write_json(folder / layout.MANIFEST, manifest.model_dump(mode="json", exclude_unset=True))


def load(folder: Path) -> Manifest:
    """The manifest of deploy folder `folder`; one line naming the file when there is none."""
    path = folder / layout.MANIFEST
    if not path.is_file():
        raise ModelFileError(f"{path}: not found (is {folder} a deploy/<model> folder?)")
    return Manifest.model_validate(read_json(path))
