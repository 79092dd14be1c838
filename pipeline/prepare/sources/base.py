"""What every source kind provides to the export stage and to native variants."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pipeline.core.config import PARAMS_FILE, ExportConfig, ModelConfig
from pipeline.core.data import Arrays, DataSet, generate_inputs
from pipeline.core.errors import ConfigError, ModelFileError, first_line
from pipeline.core.layout import model_dir

T = TypeVar("T")


class SourceModel(ABC):
    """A loaded source model. `predict` gives the FP32 reference every variant is compared with."""

    kind: str

    def __init__(self, name: str, config: ModelConfig, root: Path, dims: dict[str, int] | None = None) -> None:
        self.name, self.config, self.root = name, config, root
        self.dims = dims if dims is not None else dict(config.dims)
        self.rescues: list[dict[str, Any]] = []  # the rescues its loading used (pipeline.core.rescues)

    @property
    def field(self) -> str:
        return f"catalog.{self.name}"

    @property
    def path(self) -> Path:
        """The model file (or folder) the catalog entry names."""
        return model_dir(self.name, self.root) / (self.config.file or "")

    def require_file(self) -> Path:
        if not self.path.exists():
            raise ModelFileError(f"{self.path}: not found ({PARAMS_FILE}: {self.field}.file)")
        return self.path

    @property
    def vocab_size(self) -> int | None:
        """The vocabulary size the model's own config declares, for generated token ids."""
        return None

    @property
    def type_vocab_size(self) -> int | None:
        """How many token types (segments) the model's own config declares: bounds token_type_ids."""
        return None

    @property
    def attention(self) -> dict[str, Any]:
        """Attention heads, hidden size and architecture as the model's own config declares them
        (transformers)."""
        return {}

    def example(self, n: int = 2) -> Arrays:
        """`n` generated samples of the spec's shapes (the batch fixed by the model, if it fixes one).

        Symbolic dimensions take at least 2: exporters (torch.export) specialise size-1 dimensions."""
        dims = {k: max(v, 2) for k, v in self.dims.items()}
        batch = self.config.fixed_batch or n
        return generate_inputs(self.config.inputs, batch, 0, dims, self.vocab_size, self.field)

    def probe(self, call: Callable[[Arrays], T], n: int = 2) -> T:
        """`call` on generated inputs of the spec's shapes (`n` rows unless the batch is fixed): a model
        that rejects its declared inputs fails here, with one error naming the field, instead of deep
        inside an export."""
        example = self.example(n)
        try:
            return call(example)
        except Exception as error:
            shapes = ", ".join(f"{k}{tuple(v.shape)}" for k, v in example.items())
            raise ConfigError(
                f"{PARAMS_FILE}: {self.field}.inputs: the model rejects inputs {shapes}: {first_line(error)}"
            ) from None

    @property
    @abstractmethod
    def output_names(self) -> list[str]: ...

    @property
    def notes(self) -> list[str]:
        """What loading found that the person adding the model should hear (`add` prints it)."""
        return []

    @property
    def full_integer(self) -> str | None:
        """What shows the model is already INT8 throughout (a full-integer TFLite file's scales), or None: its
        INT8 variants would only quantize it again (pipeline.optimize.applicability)."""
        return None

    @property
    def output_batch_axes(self) -> dict[str, int]:
        """The outputs whose batch axis is not the first (a state [layers, batch, hidden]), by name:
        `predict` returns them rows first, and the variants' runtimes are told (pipeline.runtimes.layout)."""
        return {}

    def edge_rows(self, scoring: DataSet) -> DataSet | None:
        """Rows where a converted variant is most likely to answer otherwise than the source (a tree ensemble's
        split thresholds), made from the scoring rows; None: none the source can name. The export stage saves
        them with the source's outputs, and the bench judges every variant there without a tolerance."""
        return None

    @abstractmethod
    def predict(self, inputs: Arrays) -> Arrays:
        """Outputs by name for a batch of inputs, as float/int numpy arrays."""

    @abstractmethod
    def export_onnx(self, path: Path, export: ExportConfig) -> dict[str, Any]:
        """Write the model as ONNX, every symbolic dimension of the spec dynamic; return what was done."""


def output_names(config: ModelConfig, count: int, field: str, found: list[str] | None = None) -> list[str]:
    """Names for a model's outputs: the catalog's `outputs`, else the model's own, else output/outputN."""
    if config.outputs is not None:
        if len(config.outputs) != count:
            raise ConfigError(
                f"{PARAMS_FILE}: {field}.outputs: lists {len(config.outputs)} names, the model has {count} outputs"
            )
        return list(config.outputs)
    if found:
        return found
    return ["output"] if count == 1 else [f"output{i}" for i in range(count)]
