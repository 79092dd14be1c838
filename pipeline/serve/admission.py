"""The server's bounded queue: at most `instances + queue` infer requests inside it at once, each on an
instance or waiting for one (`serve --max-queue`, by default 4 per instance). One more is answered
503 with Retry-After at once, before its body is read: an unbounded queue only turns overload into
timeouts and memory (every waiting request holds its body), while a 503 tells a client or a load
balancer to go elsewhere or come back.

Entered and left on the event loop only, between awaits, so it needs no lock.
"""

from __future__ import annotations

from types import TracebackType

from pipeline.serve.errors import HTTPError

RETRY_AFTER_S = 1


class Admission:
    def __init__(self, instances: int, queue: int) -> None:
        self.instances, self.queue, self.inside = instances, queue, 0

    def __enter__(self) -> Admission:
        if self.inside >= self.instances + self.queue:
            raise HTTPError(
                503,
                f"the server is full: {self.instances} instance(s) busy and {self.queue} request(s) waiting "
                f"(serve --max-queue {self.queue}); retry in {RETRY_AFTER_S} s",
                {"Retry-After": str(RETRY_AFTER_S)},
            )
        self.inside += 1
        return self

    def __exit__(self, kind: type | None, error: BaseException | None, trace: TracebackType | None) -> None:
        self.inside -= 1
