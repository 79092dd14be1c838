"""One contender of the select stage's contest in a process of its own, as it is deployed: its runtime
alone in the process, loaded with the variant's build settings and the bench's threads.

    python -m pipeline.measure.contest_worker REQUEST_JSON

REQUEST_JSON: {"model", "folder", "root", "batch", "config"} (config: the contest's settings). The worker
loads the variant and prepares its call on the model's reference rows, then answers one JSON line per line
of its input (pipeline.core.line_process):
    (at start)    {"runtime": {...}, "load_ms": ...}   or {"error": "..."}
    warm          the bench's warm-up, then {"per_call_s": ..., "settle_s": ...}
    block N       one block of N timed calls (pipeline.measure.interleaved.timed_block), then the process's
                  settle: {"ns": [each call's figure], "settle_s": ...}
The coordinator (pipeline.measure.contest) asks one worker at a time; it reads the answer only once this
process is quiet, so the next worker's block never overlaps this one's spinning pool.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import IO, Any

import numpy as np

from pipeline.core.config import ContestConfig
from pipeline.core.data import sample_batch
from pipeline.core.isolate import leave
from pipeline.core.line_process import LineProcess, answer_on, error_answer, reply
from pipeline.core.records import source as source_record
from pipeline.measure.harness import no_gc, seconds_per_call, warm_up
from pipeline.measure.interleaved import settle, timed_block
from pipeline.measure.loading import load_variant


class InWorker:
    """The coordinator's side of one worker (pipeline.measure.interleaved.Contender): started, loaded,
    warmed up when asked (`warm`), then one block per `block`."""

    def __init__(self, request: dict[str, Any], env: dict[str, str] | None = None, command: list[str] | None = None):
        """`command`: another worker program speaking the same protocol (the tests' recording stub)."""
        base = command or [sys.executable, "-m", __name__]
        self.process = LineProcess([*base, json.dumps(request)], env)
        self.per_call_s = 0.0
        self.runtime: dict[str, Any] = {}

    def loaded(self) -> None:
        """Wait for the load's answer (raises WorkerFailed when it could not load)."""
        self.runtime = self.process.read().get("runtime", {})

    def warm(self) -> None:
        self.per_call_s = max(float(self.process.ask("warm")["per_call_s"]), 1e-7)

    def block(self, calls: int) -> tuple[np.ndarray, float]:
        answer = self.process.ask(f"block {calls}")
        return np.asarray(answer["ns"], dtype=np.int64), float(answer["settle_s"])

    def close(self) -> None:
        self.process.close()


def serve(request: dict[str, Any], channel: IO[str]) -> None:
    """Load, then answer `warm` and `block N` lines from stdin until it closes."""
    settings = ContestConfig.model_validate(request["config"])
    root = Path(request["root"])
    try:
        loaded = load_variant(request["model"], Path(request["folder"]), root)
        rows = source_record.load(request["model"], root).fixed_batch or request["batch"]
        call = loaded.session.prepare(sample_batch(loaded.reference.inputs, rows))
    except Exception as error:  # the load's failure is this contender's, answered: the coordinator records it
        reply(channel, error_answer(error))
        return
    reply(channel, {"runtime": loaded.session.details(), "load_ms": loaded.load_ms})
    with no_gc():
        for line in sys.stdin:
            verb, _, argument = line.strip().partition(" ")
            try:
                if verb == "warm":  # the first calls; every block starts with untimed ones too
                    warm_up(call, loaded.params.bench.warmup.model_copy(update={"seconds": settings.warmup_seconds}))
                    answer = {"per_call_s": seconds_per_call(call), "settle_s": settle(settings)}
                else:
                    times = timed_block(call, int(argument))
                    answer = {"ns": times.tolist(), "settle_s": settle(settings)}
            except Exception as error:
                answer = error_answer(error)
            reply(channel, answer)


if __name__ == "__main__":
    serve(json.loads(sys.argv[1]), answer_on())
    leave(0)  # the coordinator waits for this exit: no native teardown
