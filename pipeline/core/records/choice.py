"""The select stage's decision for one model (reports/selection/<model>.json, committed): written and read here only."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from pipeline.core import layout
from pipeline.core.files import read_json, write_json
from pipeline.core.outcome import Kind, Skip
from pipeline.core.records.base import Part


class CandidateFigures(Part):
    """One measured (ok) variant as the select stage's screen ranked it, on its stored figures: what
    the report plots and marks without screening again."""

    feasible: bool  # met every constraint
    latency_ms: float  # at the configured percentile (a contest's own figures are in `why`)
    loss: float | None  # task metric drop vs the FP32 source, else 1 - the worst output's score; None: unknown
    size_mb: float


class SpeedUp(Part):
    """A contender's speed-up over the source's own runtime, both timed in the select stage's contest, side
    by side in worker processes of their own: the median of the per-round ratios and its 95% interval."""

    ratio: float
    low: float
    high: float | None = None  # None: too few rounds to bound it above (JSON has no infinity)


class Choice(Part):
    """The select stage's decision for one model (reports/selection/<model>.json, committed): what the
    gate compares between revisions and the report and summary quote."""

    status: Literal["ok", "none"]
    chosen: str  # "none" when nothing met the constraints
    runtime: str = ""
    objective: str = ""
    value: float | None = None
    latency_ms: float | None = None
    measured: str = ""  # how the latency was measured: side by side, or the stored figures
    tied_with: list[str] = Field(default_factory=list)
    accuracy_delta: float | None = None
    ppl_increase_pct: float | None = None
    fidelity: float | None = None
    size_mb: float | None = None
    feasible: int = 0
    candidates: int = 0
    reason: str = ""
    why: str = ""
    rejected: dict[str, str] = Field(default_factory=dict)
    pareto_front: list[str] = Field(default_factory=list)
    # the configured variants that can never apply to this model (no stages: applicability.not_applicable), with why
    not_applicable: dict[str, str] = Field(default_factory=dict)
    # every measured variant's figures as the screen ranked them (empty in revisions before they were kept)
    figures: dict[str, CandidateFigures] = Field(default_factory=dict)
    # the contest's contenders' speed-ups over `baseline` (the source's own runtime), timed beside it; the
    # other variants' speed-ups are the stored bench figures' ratio (pipeline.present.summary says which)
    baseline: str = ""
    speedups: dict[str, SpeedUp] = Field(default_factory=dict)

    def not_applicable_skips(self) -> dict[str, Skip]:
        """`not_applicable` as typed skips, for readers that list them beside skipped records: the plan's
        rules give no other kind than NOT_APPLICABLE, so the record keeps the reason alone."""
        return {variant: Skip(Kind.NOT_APPLICABLE, reason) for variant, reason in self.not_applicable.items()}


def write_choice(model: str, choice: Choice, root: Path = Path(".")) -> None:
    """Every field, a missing figure as null (the decision says what it lacked); perplexity for decoders only."""
    text_only = {"ppl_increase_pct"} if choice.ppl_increase_pct is None else set()
    write_json(layout.selection_file(model, root), choice.model_dump(mode="json", exclude=text_only))


def load_choice(model: str, root: Path = Path("."), lenient: bool = False) -> Choice | None:
    """The recorded decision for `model`, or None before the select stage ran."""
    path = layout.selection_file(model, root)
    return parse_choice(read_json(path), lenient) if path.exists() else None


def parse_choice(data: dict[str, Any], lenient: bool = False) -> Choice:
    """`lenient`: an older revision's decision (the gate's base), keys this version dropped ignored."""
    return Choice.model_validate({k: v for k, v in data.items() if k in Choice.model_fields} if lenient else data)
