"""The build stage's record of one variant (artifacts/<model>/<variant>/build.json), written and read here
only: how the build ended, what the artifact is, and the runtime config it must be loaded with.

`RuntimeConfig` travels on: the bench worker, the contest and `predict` on a deploy machine (through the
manifest) load the artifact with it, so every figure and every deployment ran the same settings.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field

from pipeline.core import layout
from pipeline.core.config import InputSpec
from pipeline.core.files import read_json, write_json
from pipeline.core.outcome import Kind, Status
from pipeline.core.records.base import Part


class ModelLayout(Part):
    """A model not rows first (a scalar input, a state's batch axis): its inputs' specs and the axis each
    output's rows are on (pipeline.runtimes.layout gives the runtime the model's own layout)."""

    inputs: dict[str, InputSpec]
    outputs: dict[str, int] = Field(default_factory=dict)


class RuntimeConfig(Part):
    """How the runtime loads the artifact: the settings its pass chose. Every runtime honours these two; each
    types its own further keys in its adapter module (`Config`, a subclass: pipeline.runtimes.ort.Config,
    .ov.Config, ...), with which pipeline.runtimes.load validates them. The record keeps a runtime's keys as they
    are, so a new runtime adds no field here."""

    model_config = ConfigDict(extra="allow")

    layout: ModelLayout | None = None  # a model not rows first: fed in its own layout (pipeline.runtimes.layout)
    code_root: str | None = None  # where a code artifact's factory module lies (predict: the deploy folder)

    def as_dict(self) -> dict[str, Any]:
        """The settings that are set, as the files record them."""
        return self.model_dump(mode="json", exclude_none=True)


class BuildFacts(Part):
    """What the pass says about its artifact (recorded as the variant's `build`). Each pass adds its
    own settings and counts, kept as they are; the ones other steps read are typed here."""

    model_config = ConfigDict(extra="allow")

    seconds: float | None = None
    load_check: str | None = None  # the artifact loaded by its runtime and ran a batch
    quantized_ops: dict[str, int] | None = None  # an integer ONNX artifact's quantized operators
    # an INT8 variant whose activations the runtime did not quantize here: float matrix products
    activations_quantized_at_run_time: bool | None = None
    activations_check: str | None = None
    calibration_origin: str | None = None  # the rows it was calibrated on (held out from scoring)
    validation_origin: str | None = None  # the rows a fallback tuned on
    rescues: list[dict[str, Any]] | None = None  # the rescues used (pipeline.core.rescues: Rescue.record)

    def as_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_unset=True)


class BuildRecord(Part):
    """One variant's build: ok with its entry, or skipped / failed with the reason."""

    status: Status
    kind: Kind
    reason: str = ""
    variant: str
    runtime: str
    precision: str  # the catalogue's; the bench records what the runtime executed
    target: str = "cpu"  # where it is built to run (pipeline.core.targets)
    per_target: bool = False
    entry: str = ""  # the file or folder in the variant's folder that the runtime loads
    runtime_config: RuntimeConfig = Field(default_factory=RuntimeConfig)
    build: BuildFacts = Field(default_factory=BuildFacts)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def write(record: BuildRecord, folder: Path) -> None:
    """Into the variant's (temporary) build folder."""
    facts = {"runtime_config": record.runtime_config.as_dict(), "build": record.build.as_dict()}
    write_json(folder / layout.BUILD_INFO, record.model_dump(mode="json", exclude=set(facts)) | facts)


def load(folder: Path) -> BuildRecord:
    """The build record in a variant's folder (pipeline.core.layout.variant_dir, built_dir)."""
    return BuildRecord.model_validate(read_json(folder / layout.BUILD_INFO))
