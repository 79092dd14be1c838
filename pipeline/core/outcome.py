"""How a variant ended: the words every stage records and the report sorts by (no imports, so the
registry and the error types can use them)."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

Status = Literal["ok", "skipped", "failed"]  # what the tracked metrics file says


class Kind(StrEnum):
    """How a variant ended, finer than `status`: the report lists variants that do not apply once, as a
    fact, and warns about the ones that could have run but did not."""

    OK = "ok"
    FAILED = "failed"
    NOT_APPLICABLE = "skipped-not-applicable"  # the model's source kind, task or catalog entry rules it out
    NOT_NEEDED = "skipped-not-needed"  # a fallback whose variant already meets the constraints
    UNAVAILABLE = "skipped-unavailable"  # could apply, but a package, target or device is missing here

    @property
    def status(self) -> Status:
        return "skipped" if self.value.startswith("skipped") else self.value  # type: ignore[return-value]
