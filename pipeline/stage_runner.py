"""The entry point of every DVC stage (stages/*.py): parse positional args, load params.yaml, call
the stage's function, and turn a PipelineError into one line on stderr and exit code 2, never a
traceback the user has to read.

A stage prints one line: its result. Everything else it or its libraries write (TensorFlow's absl
warnings, NNCF's progress bars, torch.onnx's notices) goes to reports/logs/stages/<stage>.log.

It imports only what it needs, so a stage's `deps` list what its own work imports and nothing more:
it knows no record (a stage returns a dict, read as its line: `StageLine`'s `status` and `reason`), so
an edit to one reruns only the stages that read it.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from pipeline.core import layout
from pipeline.core.errors import PipelineError


def run_stage(
    function: Callable[..., Any],
    arg_names: Sequence[str],
    argv: Sequence[str] | None = None,
    shared_lock: bool = False,
) -> int:
    """Entry point of a DVC stage: parse positional args, load params.yaml, call `function`.

    An arg name ending in `?` is optional (None when left out).

    `shared_lock` (train, export, build) holds the machine lock shared around the call
    (pipeline.machine.lock): builds run beside each other; a benchmark, which holds it exclusively
    while it measures (pipeline.measure.stage), waits for them."""
    from pipeline.core.config import load_params
    from pipeline.machine.lock import machine_lock

    parser = argparse.ArgumentParser(description=function.__doc__)
    names = [name.rstrip("?") for name in arg_names]
    for name, given in zip(names, arg_names, strict=True):
        parser.add_argument(name, nargs="?" if given.endswith("?") else None)
    args = parser.parse_args(argv)
    values = [getattr(args, name) for name in names]
    words = [Path(sys.argv[0]).stem if sys.argv[0].endswith(".py") else function.__name__, *filter(None, values)]
    name, log = " ".join(words), LOGS / f"{'-'.join(words)}.log"  # e.g. `build spam_fnn onnx_opt`
    started = time.perf_counter()
    try:
        with chatter_to(log):
            params = load_params()
            with machine_lock(exclusive=False) if shared_lock else nullcontext(0.0) as waited:
                if waited > 1:
                    print(f"waited {waited:.0f} s for the machine lock (a benchmark was measuring)", file=sys.stderr)
                result = function(*values, params)
        with log.open("a") as sink:
            sink.write(peak_memory_line(time.perf_counter() - started) + "\n")
    except PipelineError as error:
        print(f"error: {name}: {error}", file=sys.stderr)
        return 2
    except BaseException:
        print(f"error: {name}: crashed; the traceback is in {log}", file=sys.stderr)
        raise
    line = StageLine.model_validate(result if isinstance(result, dict) else {})
    if line.status:
        print(f"{name}: {line.status}" + (f" ({line.reason.splitlines()[0][:200]})" if line.reason else ""))
    return 0


class StageLine(BaseModel):
    """How a stage ended, as its function's result says: the one line the stage prints. The result's
    other keys (an export report, a bench plan) are the function's own."""

    model_config = ConfigDict(extra="ignore")

    status: str | None = None  # None: the result does not say (training metrics, a plan)
    reason: str = ""


LOGS = layout.stage_logs()
PEAK_PREFIX = "stage peak RSS:"


def peak_memory_line(seconds: float) -> str:
    """The stage's peak memory as the kernel kept it (getrusage): this process and its largest
    child (isolated converters, bench workers). Written last in the stage's log, where
    benchmarks/stage_memory.py reads it: a stage's memory without sampling anything."""
    import resource

    own, child = (resource.getrusage(who).ru_maxrss / 1024 for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return f"{PEAK_PREFIX} process {own:.0f} MB, largest child {child:.0f} MB, {seconds:.1f} s"


@contextmanager
def chatter_to(log: Path) -> Iterator[None]:
    """Send this process's stdout and stderr (file descriptors, so child processes and C++ libraries
    too) to `log` for the duration; a traceback raised inside is written there before they return."""
    log.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with log.open("w") as sink:
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        try:
            yield
        except BaseException:
            traceback.print_exc()
            raise
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
