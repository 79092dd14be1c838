"""Functions the isolation tests run in a child process."""

from __future__ import annotations

import os
import signal
import time

from pipeline.errors import ModelFileError


def add(a: int, b: int) -> int:
    return a + b


def raise_value_error() -> None:
    raise ValueError("bad things\nhappened here")


def raise_user_error() -> None:
    raise ModelFileError("m.onnx: not a valid ONNX model")


def not_applicable() -> None:
    from pipeline.errors import NotApplicable

    raise NotApplicable("torchax does not import with this torch")


def die() -> None:
    print("about to crash", flush=True, file=__import__("sys").stderr)
    os.kill(os.getpid(), signal.SIGKILL)


def sleep(seconds: float) -> None:
    time.sleep(seconds)
