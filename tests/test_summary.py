"""`python -m pipeline summary` on synthetic records: the default fits the terminal, --wide shows every column."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pipeline.core.config import load_params
from pipeline.core.records import VariantRecord
from pipeline.present.summary import BRIEF, COLUMNS, WIDE_HINT, print_summary
from tests.conftest import REPO, record_this_machine
from tests.helpers import metric, record_choice

BROKEN = "the runtime refused the artifact: " + "a reason long enough to need more than one line of any terminal " * 2
SHORT = {"budget": "short", "reason": "out of contention: p50 9 ms is 9x onnx_opt's p50 1 ms", "best_known": "onnx_opt"}


@pytest.fixture
def measured(tmp_path: Path, machine: str) -> Path:
    """A spam_fnn project with the records a bench writes: ok, noisy, out of contention and failed
    variants; its select record lists the configured variants that never apply (text generation...)."""
    params = yaml.safe_load((REPO / "params.yaml").read_text()) | {"models": ["spam_fnn"]}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    found: dict[str, VariantRecord] = {
        "torch_eager": metric(3.0),
        "onnx_fp32": metric(1.0),
        "onnx_opt": metric(0.9),
        "onnx_int8_static": metric(0.7, precision="int8", noise=25.0),
        "openvino_int8_dynamic": metric(9.0, precision="int8+bf16", screen=SHORT),
        "openvino_fp32": metric(1.0, status="failed", reason=BROKEN),
    }
    folder = tmp_path / "reports" / "details" / "spam_fnn"
    folder.mkdir(parents=True)
    for name, record in found.items():
        (folder / f"{name}.json").write_text(record.model_dump_json(exclude_none=True))
    record_this_machine(tmp_path)
    record_choice("spam_fnn", load_params(tmp_path / "params.yaml"), tmp_path)
    return tmp_path


def printed(root: Path, columns: int, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch, **options) -> str:
    monkeypatch.setenv("COLUMNS", str(columns))  # the terminal a person has, as shutil.get_terminal_size reads it
    print_summary(root=root, **options)
    return capsys.readouterr().out


def test_the_default_summary_fits_a_100_column_terminal_one_line_per_row_and_reason(measured, capsys, monkeypatch):
    text = printed(measured, 100, capsys, monkeypatch)
    lines = text.splitlines()
    assert max(map(len, lines)) <= 100, text
    header = next(line for line in lines if line.startswith("variant"))
    assert all(column in header for column in BRIEF) and "footprint MB" not in text and "p99 ms" not in text
    for variant in ("torch_eager", "onnx_fp32", "onnx_opt", "openvino_int8_dynamic"):  # a row is one line
        assert any(line.startswith(variant) and line.rstrip().endswith("ok") for line in lines), text
    assert any(line.startswith("onnx_int8_static") and "0.7 ±25.0%" in line and "ok (noisy)" in line for line in lines)
    choice = yaml.safe_load((measured / "reports" / "selection" / "spam_fnn.json").read_text())
    reasons = set(choice["not_applicable"].values())
    assert len(reasons) > 1 and sum("skipped-not-applicable" in line for line in lines) == len(reasons)
    assert next(line for line in lines if "openvino_fp32: failed: the runtime refused" in line).endswith("…")
    assert "  out of contention (short budget, no sweeps): openvino_int8_dynamic" in lines
    assert lines[-1] == WIDE_HINT


def test_wide_shows_every_column_and_every_note_in_full(measured, capsys, monkeypatch):
    text = printed(measured, 100, capsys, monkeypatch, wide=True)
    assert all(word in text for column in COLUMNS for word in column.split()), text
    assert "(b8)" in text and "100" in text  # the peak throughput and footprint columns, for two
    assert BROKEN.split()[-1] in text and SHORT["reason"] in text
    assert "whose worst bounds the rest" in " ".join(text.split())  # the how-measured line wraps at the width
    assert WIDE_HINT not in text


def test_a_status_mark_every_row_has_is_said_once_under_the_table(tmp_path, machine, capsys, monkeypatch):
    """Every measured variant's p99 rests on fewer than 1000 calls: one note, not "ok (p99 < 1000 calls)" in
    every row; a mark only one row has stays in its row."""
    params = yaml.safe_load((REPO / "params.yaml").read_text()) | {"models": ["spam_fnn"]}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    folder = tmp_path / "reports" / "details" / "spam_fnn"
    folder.mkdir(parents=True)
    found = {"torch_eager": metric(3.0, p99_low_confidence=True), "onnx_fp32": metric(1.0, p99_low_confidence=True),
             "onnx_opt": metric(0.9, noise=25.0, p99_low_confidence=True)}  # fmt: skip
    for name, record in found.items():
        (folder / f"{name}.json").write_text(record.model_dump_json(exclude_none=True))
    record_this_machine(tmp_path)
    record_choice("spam_fnn", load_params(tmp_path / "params.yaml"), tmp_path)
    lines = printed(tmp_path, 100, capsys, monkeypatch).splitlines()
    assert any(line.startswith("onnx_fp32") and line.rstrip().endswith(" ok") for line in lines), lines
    assert any(line.startswith("onnx_opt") and line.rstrip().endswith("ok (noisy)") for line in lines), lines
    assert sum("p99" in line for line in lines) == 1
    assert "  every variant's p99 is read from fewer than 1000 calls: a rough figure" in lines


def test_a_contest_speedup_too_short_to_bound_reads_back_and_says_so(tmp_path):
    """A contest of few rounds bounds the speed-up by (0, inf); JSON has no infinity, so the choice keeps null
    there and still loads, and the summary prints the interval as unbounded rather than a tight figure."""
    from pipeline.core.records.choice import Choice, SpeedUp, parse_choice
    from pipeline.present.summary import speedup

    choice = Choice(status="ok", chosen="a", baseline="b", speedups={"a": SpeedUp(ratio=2.0, low=0.0, high=None)})
    again = parse_choice(choice.model_dump(mode="json"))
    assert again.speedups["a"].high is None
    assert speedup(None, None, again.speedups["a"]) == "2.00x ±inf%"  # type: ignore[arg-type]
