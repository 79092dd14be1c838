"""How a variant ended: the words every stage records and the report sorts by, and the one typed
reason a variant is not built (`Skip`). No imports, so the registry, the error types and every phase
can use them."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

Status = Literal["ok", "skipped", "failed"]  # what the tracked metrics file says


class Kind(StrEnum):
    """How a variant ended, finer than `status`: the report lists variants that do not apply once, as a
    fact, and warns about the ones that could have run but did not. Which rule gives which kind, and
    where each is asked: pipeline.optimize.applicability.RULES (docs/variants.md, "Why a variant is not
    built"). The values are what records hold: they never change, so older records stay readable."""

    OK = "ok"
    FAILED = "failed"
    # The variant cannot help this model, whatever the machine: its catalog entry's skip list, its task,
    # its source kind, ONNX-ML operators or string inputs, no configured target of its device (the plan: no
    # stages); an INT8 variant of a full-integer source; the
    # pass's own questions about the export's model family (Pass.not_for) or, for a fallback, about the
    # records of the variants it rescues (Pass.nothing_to_gain); or what the pass finds while running
    # (NotApplicable: nothing was quantized, an architecture its converter does not support).
    NOT_APPLICABLE = "skipped-not-applicable"
    NOT_NEEDED = "skipped-not-needed"  # a fallback whose rescued variant already meets the constraints
    # Could apply, but this machine lacks what it needs: a usable target (the probe), its runtime's
    # packages or its adapter's support for the target, an optional package its pass imports; or the
    # pass finds so while running (Unavailable).
    UNAVAILABLE = "skipped-unavailable"

    @property
    def status(self) -> Status:
        return "skipped" if self.value.startswith("skipped") else self.value  # type: ignore[return-value]


@dataclass(frozen=True)
class Skip:
    """Why a variant is not built for a model here, and which kind of skip that is."""

    kind: Kind
    reason: str
