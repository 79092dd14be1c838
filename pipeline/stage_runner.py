"""The entry point of every DVC stage (stages/*.py): parse positional args, load params.yaml, call
the stage's function, and turn a PipelineError into one line on stderr and exit code 2, never a
traceback the user has to read.

It imports only what it needs, so a stage's `deps` (checked by tests/test_stage_deps.py) list
what its own work imports and nothing more.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

from pipeline.errors import PipelineError


def run_stage(
    function: Callable[..., Any],
    arg_names: Sequence[str],
    argv: Sequence[str] | None = None,
    machine: str | None = None,
) -> int:
    """Entry point of a DVC stage: parse positional args, load params.yaml, call `function`.

    `machine` = "shared" (train, export, build) or "exclusive" (bench) holds the machine lock
    (pipeline.machine_lock) around the call: builds run beside each other, a benchmark beside nothing."""
    from contextlib import nullcontext

    from pipeline.config import load_params
    from pipeline.machine_lock import machine_lock

    parser = argparse.ArgumentParser(description=function.__doc__)
    for name in arg_names:
        parser.add_argument(name)
    args = parser.parse_args(argv)
    try:
        params = load_params()
        with machine_lock(machine == "exclusive") if machine else nullcontext(0.0) as waited:
            if waited > 1:
                print(f"waited {waited:.0f} s for the machine lock ({machine})", file=sys.stderr)
            result = function(*(getattr(args, n) for n in arg_names), params)
    except PipelineError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if isinstance(result, dict) and "status" in result:
        line = f"{' '.join(getattr(args, n) for n in arg_names) or function.__name__}: {result['status']}"
        print(line + (f" ({result['reason']})" if result.get("reason") else ""))
    return 0
