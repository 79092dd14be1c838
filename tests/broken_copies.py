"""Each assertion issue 66 made meaningful, shown to fail against a broken copy of the code: every entry breaks
one thing in a scratch worktree of HEAD, runs the test that should catch it, and expects it to fail; then the
same test on the unbroken copy, expected to pass. Not collected by pytest (no test_ prefix): run it by hand.

    python -m tests.broken_copies [--only NAME,...]     # a line per entry: caught / NOT CAUGHT, and rc 1 if any missed
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Broken:
    name: str
    path: str  # a file of the repository
    old: str  # replaced once, exactly
    new: str
    test: str  # a pytest node id


BROKEN = [
    Broken("release and pipeline times swapped", "pipeline/serve/side_by_side.py",
           "release_ms=float(np.median(times[0]))", "release_ms=float(np.median(times[1]))",
           "tests/test_serving_releases.py::test_side_by_side_reports_each_sides_own_times_and_their_ratio_release_over_pipeline"),
    Broken("predict's answers scaled by 1.0001 (the server wraps the same Predictor)", "pipeline/serve/predict.py",
           "return outputs_to_model({name: outputs[name] for name in self.output_names}, axes)",
           "return outputs_to_model({n: outputs[n] * 1.0001 if outputs[n].dtype.kind == 'f' else outputs[n] "
           "for n in self.output_names}, axes)",
           "tests/test_serving_protocol.py::test_every_datatype_through_tritonclient_is_what_predict_returns"),
    Broken("GEMM peak read 1000x too fast", "pipeline/measure/peaks.py",
           "rates, giga / float(np.mean(seconds)),", "rates, 1000 * giga / float(np.mean(seconds)),",
           "tests/test_roofline.py::test_the_gemm_peak_is_within_its_interval_on_repeat"),
    Broken("a rescue's row missing from the users' table", "docs/variants.md",
           "| `string_normalizer_locale` |", "| `string-normalizer-locale` |",
           "tests/test_rescues.py::test_every_rescue_names_an_installed_library_and_is_in_the_users_table"),
    Broken("an engine release's runtime pin mistyped", "pipeline/core/engine_versions.yaml",
           '"26.07": {server: 2.71.0, onnxruntime: 1.27.0,', '"26.07": {server: 2.71.0, onnxruntime: 1.27.99,',
           "tests/test_serving_releases.py::test_a_release_that_reads_the_artifact_is_named_in_the_files_with_what_it_answered_and_its_latency"),
    Broken("an embedding's worst row not held to min_cosine", "pipeline/core/quality.py",
           "cosine, floor = block.cosine_min, constraints.min_cosine", "cosine, floor = 1.0, constraints.min_cosine",
           "tests/test_evaluate.py::test_rows_of_unit_norm_are_an_embedding_even_when_every_value_lies_in_0_1"),
    Broken("points judged at 10% of their span, not 1%", "pipeline/core/decisions.py",
           "POINT_TOLERANCE = 0.01", "POINT_TOLERANCE = 0.1",
           "tests/test_readings.py::test_landmarks_5_px_off_at_cosine_09999_are_rejected_naming_the_displacement"),
]  # fmt: skip


def pytest_rc(tree: Path, test: str) -> int:
    command = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "--numprocesses=0", test]
    return subprocess.run(command, cwd=tree, capture_output=True, text=True).returncode


def check(entry: Broken, tree: Path) -> tuple[int, int]:
    """The test's exit status on the broken copy (1: it failed) and on the unbroken one (0: it passed)."""
    target = tree / entry.path
    text = target.read_text()
    if text.count(entry.old) != 1:
        raise SystemExit(
            f"{entry.name}: {entry.path} no longer holds {entry.old!r} once; update tests/broken_copies.py"
        )
    target.write_text(text.replace(entry.old, entry.new))
    try:
        broken_rc = pytest_rc(tree, entry.test)
    finally:
        target.write_text(text)
    return broken_rc, pytest_rc(tree, entry.test)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated parts of entry names (default: all)")
    args = parser.parse_args(argv)
    entries = [e for e in BROKEN if not args.only or any(part in e.name for part in args.only.split(","))]
    missed = 0
    with tempfile.TemporaryDirectory(prefix="broken-copies-") as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "worktree", "add", "--detach", str(tree), "HEAD"], cwd=REPO, check=True,
                       capture_output=True)  # fmt: skip
        try:
            for entry in entries:
                broken_rc, unbroken_rc = check(entry, tree)
                caught = (broken_rc, unbroken_rc) == (1, 0)
                missed += not caught
                print(f"{'caught' if caught else 'NOT CAUGHT'} (rc {broken_rc} broken, {unbroken_rc} unbroken): "
                      f"{entry.name} ({entry.test.split('::')[-1]})", flush=True)  # fmt: skip
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=REPO, capture_output=True)
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
