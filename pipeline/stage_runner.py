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
    shared_lock: bool = False,
) -> int:
    """Entry point of a DVC stage: parse positional args, load params.yaml, call `function`.

    An arg name ending in `?` is optional (None when left out).

    `shared_lock` (train, export, build) holds the machine lock shared around the call
    (pipeline.machine_lock): builds run beside each other; a benchmark, which holds it exclusively
    while it measures (pipeline.bench.stage), waits for them."""
    from contextlib import nullcontext

    from pipeline.config import load_params
    from pipeline.machine_lock import machine_lock

    parser = argparse.ArgumentParser(description=function.__doc__)
    names = [name.rstrip("?") for name in arg_names]
    for name, given in zip(names, arg_names, strict=True):
        parser.add_argument(name, nargs="?" if given.endswith("?") else None)
    args = parser.parse_args(argv)
    values = [getattr(args, name) for name in names]
    try:
        params = load_params()
        with machine_lock(exclusive=False) if shared_lock else nullcontext(0.0) as waited:
            if waited > 1:
                print(f"waited {waited:.0f} s for the machine lock (a benchmark was measuring)", file=sys.stderr)
            result = function(*values, params)
    except PipelineError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if isinstance(result, dict) and "status" in result:
        line = f"{' '.join(v for v in values if v) or function.__name__}: {result['status']}"
        print(line + (f" ({result['reason']})" if result.get("reason") else ""))
    return 0
