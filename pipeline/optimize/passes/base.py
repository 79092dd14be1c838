"""The contract between the build stage and a pass."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict

from pipeline.core import layout
from pipeline.core.config import ModelConfig
from pipeline.core.data import Arrays, DataSet
from pipeline.core.inputs import outputs_rows_first, to_model_layout
from pipeline.core.records import source as source_record
from pipeline.core.records.source import Family, SourceRecord
from pipeline.runtimes.layout import model_layout

if TYPE_CHECKING:
    from pipeline.core.evaluate import SearchGoal
    from pipeline.core.records import VariantRecord


class NoConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class BuildContext:
    """Everything a pass may read; it writes only into `out_dir`."""

    model: str
    config: ModelConfig
    root: Path
    out_dir: Path
    target: str = "cpu"  # where the artifact will run (pipeline.core.targets): per-target passes compile for it
    variant: str = ""  # the variant being built: which rescues (pipeline.core.rescues) its pass may apply

    @property
    def source_dir(self) -> Path:
        return layout.source_dir(self.model, self.root)

    @property
    def exported_onnx(self) -> Path:
        return self.source_dir / layout.EXPORTED_ONNX

    @property
    def hf_folder(self) -> Path:
        """A text-generation model's Hugging Face folder, as its export copied it: what its passes start from."""
        return self.source_dir / layout.HF_DIR

    @cached_property
    def source_info(self) -> SourceRecord:
        return source_record.load(self.model, self.root)

    @property
    def fixed_batch(self) -> int | None:
        """The batch the exported model is fixed to (None: any); calibration runs in batches of it."""
        return self.source_info.fixed_batch

    @property
    def family(self) -> Family:
        """model_type (transformer | cnn | other) and, for transformers, num_heads / hidden_size."""
        return self.source_info.family

    @property
    def transformer(self) -> bool:
        return self.family.model_type == "transformer"

    @property
    def layout(self) -> dict[str, Any]:
        """The runtime config entry that gives a model not rows first (a scalar input, a state's batch
        axis) its own layout (pipeline.runtimes.layout); {} for every other model."""
        found = model_layout(self.config.inputs, self.source_info.output_batch_axes)
        return {"layout": found.model_dump(mode="json")} if found else {}

    def model_inputs(self, rows: Arrays) -> Arrays:
        """Rows-first arrays as the exported model takes them: what a pass feeds a library that runs
        the graph itself (a quantizer's calibration, NNCF's dataset)."""
        return to_model_layout(rows, self.config.inputs)

    def rows_out(self, outputs: Arrays) -> Arrays:
        """A graph's outputs, run by a library, rows first."""
        return outputs_rows_first(outputs, self.source_info.output_batch_axes)

    def max_batch(self, wanted: int, rows: int | None = None) -> int:
        """`wanted`, capped to what fits the model's memory budget and to the `rows` there are to batch (a
        batch padded past its rows only costs memory: 2 pages of 736x736 padded to 29 took 22 GB); exactly
        a fixed batch."""
        from pipeline.core.memory import batch_size

        return batch_size(min(wanted, rows or wanted), self.source_info.batching.max_batch, self.fixed_batch)

    def example(self, n: int = 2) -> Arrays:
        """`n` real eval rows (the fixed batch, if any): for tracers that specialise size-1 axes, n >= 2."""
        from pipeline.core.data import sample_batch

        return sample_batch(self.reference().inputs, self.fixed_batch or n)

    def calibration(self) -> DataSet:
        return DataSet.load(self.source_dir / layout.CALIBRATION)

    def validation(self) -> DataSet:
        """Rows a fallback may tune on, with the source's outputs: never the scoring rows. The
        export saves their inputs only; the outputs are predicted here, by the fallback that needs them."""
        from pipeline.prepare.export import source_outputs

        rows = DataSet.load(self.source_dir / layout.VALIDATION)
        if not rows.outputs:
            rows.outputs = source_outputs(self.model, self.config, self.root, self.source_info, rows.inputs)
        return rows

    def search_goal(self) -> SearchGoal:
        """What a fallback's search raises on the validation rows (pipeline.core.evaluate.SearchGoal): the
        entry's task metric when those rows carry labels, else every output's decisions."""
        from pipeline.core.evaluate import Judging, SearchGoal
        from pipeline.core.task_metrics import resolve

        rows = self.validation()
        metric = resolve(self.config.metric, self.model, self.root) if rows.targets else None
        return SearchGoal(rows, Judging.of(self.config, self.source_info.export.producers), metric)

    def reference(self) -> DataSet:
        return DataSet.load(self.source_dir / layout.REFERENCE)


@dataclass
class BuildResult:
    entry: str  # the file (or folder) in out_dir that the runtime loads
    details: dict[str, Any] = field(default_factory=dict)  # recorded under "build" in reports/details
    runtime_config: dict[str, Any] = field(default_factory=dict)  # how the runtime must load the entry
    # the rescues the build used (pipeline.core.rescues: Rescue.record), recorded as the details' `rescues`
    rescues: list[dict[str, Any]] = field(default_factory=list)


class Pass(ABC):
    """A transformation registered in pipeline.core.registry; `Config` validates its params.yaml section."""

    Config: ClassVar[type[BaseModel]] = NoConfig

    @abstractmethod
    def run(self, ctx: BuildContext, config: Any) -> BuildResult: ...

    def not_for(self, config: Any, family: Family) -> str | None:
        """Why this pass, with these knobs, is not applicable to a model of this family (the export's
        `family`: model_type transformer | cnn | other), or None. Asked by the build stage before any
        process starts."""
        return None

    def reads_export(self, config: Any, source: str) -> bool:
        """Whether the build starts from the checked ONNX export, so that a failed export fails it before any
        process starts; a pass that can convert a `source` kind's own file says when it does not."""
        return True

    def nothing_to_gain(self, config: Any, rescued: dict[str, VariantRecord]) -> str | None:
        """A fallback's own question, asked when it is needed (every variant it rescues missed a constraint): why
        its work could not improve on them, from their measured records by name (None: do the work). No build."""
        return None


def beyond_reach(start: VariantRecord, reach: float | None, max_drop: float, target_score: float,
                 relative: bool = False) -> str | None:  # fmt: skip
    """Why a search that starts from `start` (the plain variant it rescues, measured on its scoring rows) should not
    start: its figure lies further from the search's bound than `reach` (None: search whatever the start). The figure
    is the search's own: the task metric's drop (absolute, or `relative` to the source's value) where the record has
    one, else the worst output's decision score. A search reverts operations to float one group at a time and gains
    little per step: on the corpus none that started 0.18 or more below its bound reached it (docs/results.md)."""
    if reach is None:
        return None
    if start.accuracy_drop is not None:
        drop = start.accuracy_relative_drop if relative else start.accuracy_drop
        if drop is None or drop <= max_drop + reach:
            return None
        what, gap = f"a task metric drop of {drop:.4g} against max_drop {max_drop:g}", drop - max_drop
    else:
        score = start.worst_output_score
        if score is None or score >= target_score - reach:
            return None
        what, gap = f"a worst-output decision score of {score:.4f} against {target_score:g}", target_score - score
    return (
        f"out of reach: the search would start from {what} on the scoring rows, {gap:.3g} from its bound, "
        f"beyond its reach ({reach:g}: raise `reach` to search anyway)"
    )


def session_runner(runtime: str, path: Path, config: dict[str, Any] | None = None) -> Callable[[Arrays], Arrays]:
    """A one-thread session of `runtime` (pipeline.runtimes) on `path`: its run function."""
    from pipeline import runtimes

    return runtimes.load(runtime, path, 1, config or {}).run


def run_time_quantization(
    ctx: BuildContext, quantized: Callable[[Arrays], Arrays], float_twin: Callable[[Arrays], Arrays], twin: str
) -> dict[str, Any]:
    """Did the runtime quantize activations at run time on this CPU? Read from what it computed,
    never assumed: the variant's outputs against its twin whose matrix products take float
    activations (`twin` says how), on one calibration batch (never a scoring row). Identical
    outputs mean the CPU ran the float path: the variant is then weight-only INT8."""
    from pipeline.core.data import sample_batch

    batch = sample_batch(ctx.calibration().inputs, ctx.fixed_batch or 2)
    got, reference = quantized(batch), float_twin(batch)
    difference = max(float(np.max(np.abs(got[name] - reference[name]), initial=0.0)) for name in reference)
    active = difference > 0
    return {
        "activations_quantized_at_run_time": active,
        "activations_check": f"outputs {'differ' if active else 'do not differ'} from {twin}'s "
        f"(max abs {difference:.3g}, one calibration batch)",
    }
