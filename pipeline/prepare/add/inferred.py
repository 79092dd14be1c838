"""What `python -m pipeline add` reads off a model, whatever its kind: the catalog entry it infers
(`Entry`, its inputs `Input`), typed while it is built, with the files that make the model
(`Inferred`), and the command's one-line error (`AddError`).

The entry is written to params.yaml as hand-written entries look (pipeline.prepare.add.params_text):
`as_yaml` gives its mapping, keys in that order and defaults left out. It is not yet a
pipeline.core.config.ModelConfig: a scalar input may still wait for the value the eval data gives.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from pipeline.core.errors import PipelineError


class AddError(PipelineError):
    """What `add` cannot take, in one line naming the path."""


@dataclass
class Input:
    """One input's spec (params.yaml's InputSpec): its fields in the order a hand-written spec has them."""

    shape: list[int | str]
    dtype: str
    batch_axis: int = 0  # written only where it is not the first
    kind: str = "values"  # written only for token inputs
    low: int | None = None  # an integer input's range, from the eval data
    high: int | None = None  # token ids' vocabulary, or that range's end
    value: float | None = None  # a scalar input's one value

    def as_yaml(self) -> dict[str, Any]:
        """The spec as params.yaml holds it: the fields set, defaults left out."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) != f.default}


@dataclass
class Entry:
    """A catalog entry (params.yaml's ModelConfig) as `add` builds it; the fields in the order the
    written entry has them, but for a task labelled eval data gave it (`task_from_labels`): it comes
    after the metric, as the last thing `add` learned."""

    source: str
    factory: str | None = None
    file: str | None = None
    init_seed: int | None = None
    factory_args: dict[str, str] | None = None
    inputs: dict[str, Input] | None = None  # None: a decoder (its token ids are implied)
    dims: dict[str, int] = field(default_factory=dict)  # symbolic axes' values; eval data may take them
    outputs: list[str] | None = None
    output_rows: dict[str, int] | None = None  # outputs' rows axes the file does not tell (--output-rows)
    onnx_ml: bool = False
    task: str | None = None
    eval_data: str | None = None
    metric: str | None = None
    judged_as: dict[str, str] | None = None  # --judged-as: an output's kind, where its values cannot tell
    decision_threshold: dict[str, float] | None = None  # --threshold: where an output's probabilities are read
    point_tolerance: dict[str, float] | None = None  # --tolerance: how far a points output's point may move
    task_from_labels: bool = False  # not written: where `task` goes

    def labelled(self, metric: str) -> None:
        """Labelled eval data, measured by `metric`: a classifier when it is a class metric."""
        self.metric = metric
        if metric in ("accuracy", "binary_accuracy"):
            self.task_from_labels = self.task is None
            self.task = "classification"

    def as_yaml(self) -> dict[str, Any]:
        """The entry as params.yaml holds it: the fields set (not None, False or empty dims), inputs as specs."""
        later = {"task_from_labels", *(["task"] if self.task_from_labels else [])}
        written: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in later or value is None or value is False or (f.name == "dims" and not value):
                continue
            written[f.name] = {k: spec.as_yaml() for k, spec in value.items()} if f.name == "inputs" else value
        return written | ({"task": self.task} if self.task_from_labels else {})


@dataclass
class Inferred:
    """What was read off the model: its catalog entry, the files that make it, and what to tell."""

    entry: Entry
    files: dict[str, Path]  # name inside models/NAME/ -> what is copied there (a file or a folder)
    tracked: list[str]  # of those, what `dvc add` versions (model weights; git keeps the rest)
    notes: list[str] = field(default_factory=list)
    scratch: list[Path] = field(default_factory=list)  # made while inferring (tokenized text): removed after
    output_names: list[str] = field(default_factory=list)  # the model's outputs, where the file tells them
