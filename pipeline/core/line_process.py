"""A process that answers one JSON line per line asked: the timing workers that take turns (the select
stage's contest, pipeline.measure.contest; the engine releases' side by side, pipeline.serve.side_by_side).

Each worker holds one runtime, loaded once, and runs a block of calls when asked; the caller asks one
worker at a time, so only one runtime runs at any moment, and each runs in a process of its own, as it
is deployed. A worker that dies, or answers nothing a JSON reader can read, raises `WorkerFailed` with
the last line of its stderr: the caller records that contender as failed and goes on with the others.

The worker side (`answer_on`) moves the library output off the answer channel: a runtime that prints to
stdout (some do, at load) must not break the protocol.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from typing import IO, Any

from pipeline.core.errors import one_line


class WorkerFailed(Exception):
    """The worker stopped, or answered with an error: the message is one line fit for a record."""


class LineProcess:
    """`command` started with its stderr kept in a temporary file; `ask` writes a line and reads the answer."""

    def __init__(self, command: list[str], env: dict[str, str] | None = None) -> None:
        self._stderr = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 (lives as long as the process)
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            env=os.environ | (env or {}),
        )

    def read(self) -> dict[str, Any]:
        """The next answer; raises WorkerFailed when the process stopped or answered `{"error": ...}`."""
        line = self.process.stdout.readline() if self.process.stdout else ""
        if not line:
            self.process.kill()
            code = self.process.wait()
            raise WorkerFailed(f"the worker process stopped ({self._how(code)}): {self.last_error()}")
        try:
            answer = json.loads(line)
        except json.JSONDecodeError:
            self.close()
            raise WorkerFailed(f"the worker answered what is not JSON: {line[:200].strip()!r}") from None
        if "error" in answer:
            raise WorkerFailed(answer["error"])
        return answer

    def ask(self, line: str) -> dict[str, Any]:
        """Send `line`, return its answer."""
        assert self.process.stdin is not None
        with contextlib.suppress(OSError):  # it died: read() says how
            self.process.stdin.write(line + "\n")
            self.process.stdin.flush()
        return self.read()

    def last_error(self) -> str:
        """The last non-empty line the worker wrote to stderr."""
        self._stderr.seek(0)
        lines = [line.strip() for line in self._stderr.read().splitlines() if line.strip()]
        return lines[-1][:300] if lines else "no output"

    @staticmethod
    def _how(code: int) -> str:
        return f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"

    def close(self, timeout: float = 30) -> None:
        """End the worker (its stdin closed: it returns) and drop its stderr."""
        if self.process.stdin and not self.process.stdin.closed:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._stderr.close()


def answer_on() -> IO[str]:
    """In the worker: the channel its answers go to (the original stdout), with fd 1 pointed at stderr
    from now on, so that whatever a library prints lands in the log and not in an answer."""
    channel = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    return channel


def reply(channel: IO[str], answer: dict[str, Any]) -> None:
    channel.write(json.dumps(answer) + "\n")
    channel.flush()


def error_answer(error: BaseException) -> dict[str, str]:
    """What a worker answers when a request failed: the error's type and first line."""
    return {"error": f"{type(error).__name__}: {one_line(error)}" if str(error).strip() else type(error).__name__}
