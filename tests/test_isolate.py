"""Running a function in a fresh process: results, and failures as one-line reasons."""

from __future__ import annotations

import pytest

from pipeline.core.isolate import IsolatedFailure, call


def test_returns_the_value():
    assert call("tests.helpers:add", {"a": 2, "b": 3}, timeout=60) == 5


def test_exception_becomes_a_one_line_reason():
    with pytest.raises(IsolatedFailure, match=r"^ValueError: bad things happened here$"):
        call("tests.helpers:raise_value_error", {}, timeout=60)


def test_user_errors_keep_their_message():
    with pytest.raises(IsolatedFailure, match=r"^m.onnx: not a valid ONNX model$"):
        call("tests.helpers:raise_user_error", {}, timeout=60)


def test_not_applicable_is_told_apart_from_failure():
    with pytest.raises(IsolatedFailure, match="torchax does not import") as failure:
        call("tests.helpers:not_applicable", {}, timeout=60)
    assert failure.value.skip_kind == "skipped-not-applicable"
    with pytest.raises(IsolatedFailure) as failure:
        call("tests.helpers:raise_value_error", {}, timeout=60)
    assert failure.value.skip_kind is None


def test_a_crash_is_reported_with_the_signal_and_last_line():
    with pytest.raises(IsolatedFailure, match=r"killed by SIGKILL.*about to crash"):
        call("tests.helpers:die", {}, timeout=60)


def test_timeout_kills_the_child():
    with pytest.raises(IsolatedFailure, match="timed out after 1 s"):
        call("tests.helpers:sleep", {"seconds": 30}, timeout=1)
