"""Peak memory and wall time of every stage of the given models, from the line each stage writes
last in its log (pipeline.stage_runner.peak_memory_line: getrusage of the stage process and of its
largest child). Run after `dvc repro`/`dvc exp run` in the project whose logs to read.

    python benchmarks/stage_memory.py keras_vgg19 keras_resnet50 [--out reports/benchmarks/stage_memory.txt]

A stage's peak is the larger of the two: the stage process itself, or the biggest single child
(isolated converters and bench workers run one at a time, so their peaks do not add up).

`--smoke` (no models named): writes this process's own peak line, as the stage runner does, into a
stage log in a temporary folder and tables it (tests/test_benchmarks.py).
"""

from __future__ import annotations

import argparse
import re
import tempfile
from pathlib import Path

from pipeline.stage_runner import LOGS, PEAK_PREFIX, peak_memory_line

LINE = re.compile(rf"{re.escape(PEAK_PREFIX)} process (\d+) MB, largest child (\d+) MB, ([\d.]+) s")


def stage_peaks(model: str, logs: Path = LOGS) -> dict[str, tuple[float, float]]:
    """{stage words after the model, e.g. 'export' or 'build onnx_opt': (peak MB, seconds)}."""
    found = {}
    for log in sorted(logs.glob(f"*-{model}*.log")):
        words = log.stem.split("-")
        if model not in words:
            continue
        matches = LINE.findall(log.read_text(errors="replace"))
        if matches:
            own, child, seconds = matches[-1]
            stage = " ".join(w for w in words if w != model)
            found[stage] = (max(float(own), float(child)), float(seconds))
    return found


def table(models: list[str], logs: Path = LOGS) -> str:
    rows = ["| model | stage | peak MB | time s |", "|---|---|---:|---:|"]
    for model in models:
        peaks = stage_peaks(model, logs)
        if not peaks:
            rows.append(f"| {model} | (no stage logs with a peak line under {logs}) | | |")
        for stage, (mb, seconds) in sorted(peaks.items(), key=lambda kv: -kv[1][0]):
            rows.append(f"| {model} | {stage} | {mb:,.0f} | {seconds:.0f} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*")
    parser.add_argument("--logs", type=Path, default=LOGS)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--smoke", action="store_true", help="table a log written here: checks that it runs")
    args = parser.parse_args()
    if args.smoke:
        args.models, args.logs = ["smoke"], Path(tempfile.mkdtemp(prefix="stage-logs-"))
        (args.logs / "build-smoke-onnx_fp32.log").write_text(peak_memory_line(0.5) + "\n")
    elif not args.models:
        parser.error("name at least one model")
    text = table(args.models, args.logs)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
