"""Where one variant's time goes (reports/profile/<model>/<variant>.json): its runtime's operator profile,
or why there is none. Written by the bench stage, read by the report, here only."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from pipeline.core import layout
from pipeline.core.files import read_json, write_json
from pipeline.core.records.base import Part


class OpShare(Part):
    """One operator type's part of the profiled time."""

    share_pct: float
    executions: int
    total_ms: float
    kernel: str | None = None  # the kernel that ran most of its time, where the runtime names it


class Profile(Part):
    """The top operator types by time per call, or `reason` when the runtime has no profiler or the
    variant was not measured."""

    calls: int | None = None
    profiled_ms_per_call: float | None = None
    top: dict[str, OpShare] = Field(default_factory=dict)  # by operator type, the slowest first
    reason: str | None = None


def write(model: str, variant: str, profile: Profile, root: Path = Path(".")) -> None:
    write_json(layout.profile_file(model, variant, root), profile.model_dump(mode="json", exclude_none=True))


def load(model: str, variant: str, root: Path = Path(".")) -> Profile | None:
    """The profile of `variant`, or None where the bench stage wrote none."""
    path = layout.profile_file(model, variant, root)
    return Profile.model_validate(read_json(path)) if path.exists() else None
