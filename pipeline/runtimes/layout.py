"""The model's own input layout at the runtime's door.

Inside the pipeline every input is held rows first (pipeline.core.config.InputSpec): batching, the
throughput sweep, held-out splits and fidelity read row i of every array alike. A model from elsewhere
may take a scalar (a sample rate passed on every call) or a batch axis after the first (a recurrent
state [layers, batch, hidden]), and return a state the same way. `RowsFirst` wraps a session so that
it takes and returns rows first: the inputs go to the model in its layout, once per prepared call (so
the benchmark times the runtime, not the moving), and the outputs come back rows first. The layout is
recorded in the variant's runtime config (`layout`) by the build stage, so the bench, the contest and
`predict` on a deploy machine run the artifact the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pipeline.core.config import InputSpec
from pipeline.core.data import Arrays
from pipeline.core.inputs import outputs_rows_first, to_model_layout
from pipeline.core.records.build import ModelLayout, RuntimeConfig
from pipeline.runtimes.base import AsyncQueue, OpTime, Session


def model_layout(inputs: dict[str, InputSpec], output_axes: dict[str, int]) -> ModelLayout | None:
    """The runtime config's `layout` for a model not rows first; None for one that is (nothing recorded)."""
    moved = {name: spec for name, spec in inputs.items() if not spec.rows_first}
    return ModelLayout(inputs=moved, outputs=output_axes) if moved or output_axes else None


class RowsFirst(Session):
    """A session that takes and returns rows first, whatever layout its model has."""

    def __init__(self, inner: Session, layout: ModelLayout) -> None:
        self.inner, self.layout = inner, layout
        self.specs, self.output_axes = layout.inputs, layout.outputs
        self.input_names, self.output_names = inner.input_names, inner.output_names

    def _in(self, inputs: Arrays) -> Arrays:
        return to_model_layout(inputs, self.specs)

    def run(self, inputs: Arrays) -> Arrays:
        return outputs_rows_first(self.inner.run(self._in(inputs)), self.output_axes)

    def prepare(self, inputs: Arrays) -> Callable[[], Any]:
        return self.inner.prepare(self._in(inputs))

    def request_sessions(self, requests: int, threads: int) -> tuple[list[Session], str]:
        sessions, how = self.inner.request_sessions(requests, threads)
        return [RowsFirst(s, self.layout) for s in sessions], how

    def async_queue(self, inputs: Arrays, requests: int, threads: int) -> AsyncQueue:
        return self.inner.async_queue(self._in(inputs), requests, threads)

    def op_times(self, inputs: Arrays, calls: int) -> list[OpTime]:
        return self.inner.op_times(self._in(inputs), calls)

    def load_from_cache(self) -> bool:
        return self.inner.load_from_cache()

    def details(self) -> dict[str, Any]:
        return self.inner.details() | {"layout": "the model's own (scalars, batch axes) at the runtime's door"}


def in_layout(session: Session, config: RuntimeConfig) -> Session:
    """`session` wrapped to take rows first when its runtime config records a layout."""
    return RowsFirst(session, config.layout) if config.layout else session
