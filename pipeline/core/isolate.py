"""Run one function in a fresh Python process.

Builds and benchmarks run isolated so that runtimes do not share (or pollute) one process's
memory, a crash or hang in a converter becomes a recorded failure instead of a dead pipeline, and
peak RSS measures one runtime alone (Triton Model Navigator isolates its steps the same way).

Parent: `call("module:function", kwargs, timeout)`; child: `python -m pipeline.core.isolate REQUEST RESULT`.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from pipeline.core.errors import NotApplicable, PipelineError, one_line


class IsolatedFailure(Exception):
    """The isolated call failed; the message is a one-line reason fit for a metrics file.

    `skip_kind` is set when the child raised NotApplicable (its `kind`): nothing broke, the work does
    not apply or cannot run here, found while running (what can be known before a process starts is
    pipeline.optimize.applicability's to decide).
    """

    def __init__(self, reason: str, skip_kind: str | None = None, signal: str | None = None) -> None:
        super().__init__(reason)
        self.skip_kind = skip_kind
        self.signal = signal  # the signal that killed the child (SIGFPE, ...), when one did
        self.log: Path | None = None  # the child's stderr, when the caller asked to keep it

    def evidence(self, command: str) -> str:
        """The reason, the log that holds the child's stderr and a command that reproduces the failure."""
        kept = f"log: {self.log}; " if self.log else ""
        return f"{self} [{kept}reproduce: {command}]"


def _reason(error: BaseException) -> str:
    if isinstance(error, PipelineError):
        return str(error)
    return f"{type(error).__name__}: {one_line(error)}" if str(error).strip() else type(error).__name__


def _pump(stream: Any, tail: deque[str], keep: Any) -> None:
    """Copy the child's stderr to ours line by line (live progress), to `keep`, and keep the last lines."""
    for line in iter(stream.readline, ""):
        sys.stderr.write(line)
        sys.stderr.flush()
        keep.write(line)
        if line.strip():
            tail.append(line.rstrip())


def _tree_rss_mb(pid: int) -> float:
    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0.0
    total = 0
    for process in processes:
        with contextlib.suppress(psutil.Error):
            total += process.memory_info().rss
    return total / 1e6


@dataclass
class Usage:
    """What the child's process tree took: its peak resident memory, sampled every 0.1 s, and where it
    was killed for going past the limit (None: it was not)."""

    peak_mb: float = 0.0
    killed_at_mb: float | None = None


def _watch_memory(process: subprocess.Popen, limit_mb: float, verdict: Usage, stop: threading.Event) -> None:
    """Kill the child's process group before the kernel's OOM killer takes the whole stage."""
    while not stop.wait(0.1):
        used = _tree_rss_mb(process.pid)
        verdict.peak_mb = max(verdict.peak_mb, used)
        if used > limit_mb:
            verdict.killed_at_mb = used
            os.killpg(process.pid, signal.SIGKILL)
            return


def memory_limit_mb() -> float:
    """What a child may take: 90% of the memory available when it starts."""
    return 0.9 * psutil.virtual_memory().available / 1e6


def call(
    target: str,
    kwargs: dict[str, Any],
    timeout: float,
    env: dict[str, str] | None = None,
    limit_mb: float | None = None,
    log: Path | None = None,
    usage: Usage | None = None,
) -> Any:
    """Return `target(**kwargs)` computed in a child process, or raise IsolatedFailure.

    A child whose processes together grow past `limit_mb` resident (default: 90% of the memory
    available at its start) is killed and the failure says so: one model too big for this
    machine must not bring the kernel's OOM killer down on the whole `dvc repro`. When the call
    fails (not when it does not apply), the child's whole stderr is kept at `log`. `usage`, when
    given, receives the child's peak resident memory."""
    limit = limit_mb if limit_mb is not None else memory_limit_mb()
    with tempfile.TemporaryDirectory(prefix="isolate-") as tmp:
        try:
            return _call(target, kwargs, timeout, env, limit, Path(tmp), usage or Usage())
        except IsolatedFailure as failure:
            if log is not None and not failure.skip_kind:
                log.parent.mkdir(parents=True, exist_ok=True)
                log.write_text((Path(tmp) / "stderr.log").read_text() + f"\n# {target} failed: {failure}\n")
                failure.log = log
            raise


def _call(target: str, kwargs: dict[str, Any], timeout: float, env: dict[str, str] | None, limit: float,
          tmp: Path, memory: Usage) -> Any:  # fmt: skip
    """`call`'s work, in the temporary folder `tmp` (request, result and the child's stderr)."""
    request, result = tmp / "request.json", tmp / "result.json"
    request.write_text(json.dumps({"target": target, "kwargs": kwargs}))
    child_env = os.environ | (env or {}) | {"PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "pipeline.core.isolate", str(request), str(result)],
        stderr=subprocess.PIPE,
        text=True,
        env=child_env,
        start_new_session=True,  # its own process group, so a timeout kills its helpers too
    )
    tail: deque[str] = deque(maxlen=20)
    keep = (tmp / "stderr.log").open("w")
    pump = threading.Thread(target=_pump, args=(process.stderr, tail, keep), daemon=True)
    pump.start()
    stop = threading.Event()
    watch = threading.Thread(target=_watch_memory, args=(process, limit, memory, stop), daemon=True)
    watch.start()
    try:
        code = process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        raise IsolatedFailure(f"timed out after {timeout:g} s") from None
    finally:
        stop.set()
        pump.join(timeout=5)
        keep.close()
    if memory.killed_at_mb is not None:
        raise IsolatedFailure(
            f"stopped at {memory.killed_at_mb:,.0f} MB resident: more than the {limit:,.0f} MB this machine "
            "could give it (90% of the memory available at its start)"
        )
    if result.exists():
        outcome = json.loads(result.read_text())
        if outcome["ok"]:
            return outcome["value"]
        raise IsolatedFailure(outcome["reason"], outcome["skip_kind"])  # the child below writes both
    killed_by = signal.Signals(-code).name if code < 0 else None
    how = f"killed by {killed_by}" if killed_by else f"exited with code {code}"
    last = tail[-1] if tail else "no output"
    raise IsolatedFailure(
        f"process {how} ({'out of memory? ' if code == -signal.SIGKILL else ''}last line: {last[:200]})",
        signal=killed_by,
    )


def _child(request_path: str, result_path: str) -> int:
    request = json.loads(Path(request_path).read_text())
    module_name, _, function = request["target"].partition(":")
    try:
        import importlib

        value = getattr(importlib.import_module(module_name), function)(**request["kwargs"])
        outcome = {"ok": True, "value": value}
    except Exception as error:
        if not isinstance(error, PipelineError):
            traceback.print_exc()
        skip_kind = error.kind if isinstance(error, NotApplicable) else None
        outcome = {"ok": False, "reason": _reason(error), "skip_kind": skip_kind}
    Path(result_path).write_text(json.dumps(outcome))
    return 0


def leave(code: int) -> None:
    """End a child process once its answer is written, without the interpreter's teardown: native
    libraries' destructors can take seconds there (OpenVINO 2026.4 after a failed ONNX conversion: 14 s;
    TensorFlow's 0.7 s and torch's 0.2 s at every exit). Python's exit functions still run (temporary
    folders, logging's flush), then the streams are flushed."""
    import atexit

    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    leave(_child(sys.argv[1], sys.argv[2]))
