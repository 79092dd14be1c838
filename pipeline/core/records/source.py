"""The export stage's record of one source model (artifacts/<model>/source/source.json): what every
build, bench and deploy step reads about the model it works on, written and read here only.

It says whether the source loaded and exported (`status`, `export`), what the artifacts take and give
(`inputs`, `output_names`, `output_batch_axes`, `dims`, `fixed_batch`), how large a batch fits
(`batching`), which rows were held out for what (`held_out`), and what kind of model it is (`family`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field

from pipeline.core import layout
from pipeline.core.config import InputSpec, ModelConfig
from pipeline.core.files import read_json, write_json
from pipeline.core.records.base import Part

ModelType = Literal["transformer", "cnn", "decoder", "other"]


class Batching(Part):
    """The largest batch whose activations fit export.memory_budget_mb, measured on the source
    (pipeline.core.memory.batch_limit); empty for a decoder, whose batches are its windows."""

    max_batch: int | None = None
    per_sample_mb: float | None = None
    probe_batch: int | None = None
    warm_up_mb: float | None = None
    budget_mb: float | None = None
    how: str = ""


class Family(Part):
    """What kind of model it is (pipeline.prepare.family, .decoder): the passes pick recipes by it."""

    model_type: ModelType = "other"
    how: str = ""
    architecture: str | None = None
    num_heads: int | None = None  # an encoder's attention, read from the graph or declared
    hidden_size: int | None = None
    # a decoder's (pipeline.prepare.decoder.architecture)
    hf_model_type: str | None = None
    layers: int | None = None
    heads: int | None = None
    kv_heads: int | None = None
    head_dim: int | None = None
    vocab_size: int | None = None
    context: int | None = None


class HeldOut(Part):
    """One role's rows (scoring, calibration, validation): how many, from where, and how many of the
    scoring rows it repeats (then the figures are in-sample)."""

    rows: int
    origin: str
    rows_in_scoring: int | None = None


class SourceMetric(Part):
    metric: str | None = None
    value: float | None = None


class ExportReport(Part):
    """How the export went (also reports/export/<model>.json, with the stage's timings). The figures
    below are the common ones; each converter adds its own facts (opset, exporter, parity...), kept
    as they are, like a pass's build details."""

    model_config = ConfigDict(extra="allow")

    status: Literal["ok", "failed", "skipped"]  # skipped: the converter does not apply to this model (its reason)
    reason: str = ""
    source: str | None = None
    declared_shape_notes: dict[str, str] | None = None  # by output: declared otherwise than it returns
    rescues: list[dict[str, Any]] | None = None  # how the source was loaded around a known failure (core.rescues)
    full_integer: str | None = None  # the source is INT8 throughout (a full-integer TFLite file): what says so
    readings: dict[str, dict[str, str]] | None = None  # by output: its reading and how it was found (evaluate)
    producers: dict[str, str] | None = None  # by output: the operator computing it in the export (onnx_files)


class SourceRecord(Part):
    """One source model as the export left it: ok with everything below, or failed with its reason."""

    model: str
    status: Literal["ok", "failed"]
    reason: str = ""
    task: str | None = None  # a decoder's: text-generation
    config: ModelConfig | None = None  # the catalog entry it was exported from
    inputs: dict[str, InputSpec] = Field(default_factory=dict)  # what the artifacts take (a relaxed batch: dynamic)
    output_names: list[str] = Field(default_factory=list)
    output_batch_axes: dict[str, int] = Field(default_factory=dict)  # outputs whose rows are not on axis 0
    dims: dict[str, int] = Field(default_factory=dict)  # the symbolic dimensions' values the figures are taken at
    fixed_batch: int | None = None
    vocab_size: int | None = None
    token_bounds: dict[str, int] = Field(default_factory=dict)  # each token input's vocabulary: predict checks ids
    batching: Batching = Field(default_factory=Batching)
    model_digest: str = ""  # any change to the model's folder rebuilds its variants
    eval_origin: str | None = None
    calib_origin: str | None = None
    held_out: dict[str, HeldOut] = Field(default_factory=dict)
    family: Family = Field(default_factory=Family)
    export: ExportReport

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def write(record: SourceRecord, folder: Path) -> None:
    """Into the export's (temporary) source folder, which is renamed into place when the stage ends."""
    write_json(folder / layout.SOURCE_INFO, record.model_dump(mode="json", exclude_none=True))


def load(model: str, root: Path = Path(".")) -> SourceRecord:
    """The export's record of `model` under `root`."""
    return SourceRecord.model_validate(read_json(layout.source_dir(model, root) / layout.SOURCE_INFO))
