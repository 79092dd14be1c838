"""`python -m pipeline repro`: `dvc repro` with one live progress line instead of DVC's stage chatter.

DVC visits every stage of the pipeline in order and says of each that it runs it or that it did
not change: the display counts both against the stage list (`dvc stage list --all`), and estimates the
time left from the stages run so far (an upper bound: unchanged stages take no time).
Each stage's one-line result is printed as it finishes;
everything else DVC prints goes to reports/logs/repro.log (and each stage's library chatter to its
own log under reports/logs/stages/, pipeline.stage_runner). At the end it says where the time went,
by stage kind (train, export, build, bench, select, ...: the wall clock from DVC's line starting a
stage to its next one, so DVC's own work per stage is in it; `dvc` before the first and after the
last stage), and writes that to reports/logs/repro_time.json.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections import defaultdict

from rich.console import Console
from rich.live import Live
from rich.text import Text

from pipeline.core import layout
from pipeline.core.files import write_json
from pipeline.core.layout import short_name

RUNNING = re.compile(r"^Running stage '([^']+)'")
UNCHANGED = re.compile(r"^Stage '([^']+)' didn't change")
RESULT = re.compile(r"^[\w .:/-]+: ((?:ok|skipped|failed|none)\b.*)$")  # pipeline.stage_runner's result line
LOG = layout.repro_log()


def stage_count() -> int:
    """How many stages the repository's pipeline has (every dvc.yaml: `--all`; `-R` alone lists the root's)."""
    command = ["dvc", "stage", "list", "--all", "--name-only"]
    listed = subprocess.run(command, capture_output=True, text=True, check=False)
    return len(listed.stdout.split())


def _clock(seconds: float) -> str:
    return time.strftime("%M:%S" if seconds < 3600 else "%H:%M:%S", time.gmtime(seconds))


def status_line(stage: str, done: int, total: int, started: float, durations: list[float]) -> Text:
    """`[k/N] model variant  elapsed  ~left`, the time left from the mean of the stages so far."""
    elapsed = time.monotonic() - started
    group, _, item = stage.partition("@")
    left = f"~{_clock(sum(durations) / len(durations) * (total - done))} left" if durations and total > done else ""
    return Text(f"[{done + 1}/{max(total, done + 1)}] {group} {item.replace('-', ' ')}  {_clock(elapsed)}  {left}")


def time_by_kind(timed: list[tuple[str, float]], wall: float) -> dict[str, dict[str, float]]:
    """{stage kind: {stages, seconds}} of the stages run (`timed`: (`kind@item`, seconds)), longest first,
    and `dvc`: the rest of the `wall` seconds (DVC's start, its checks of unchanged stages, its lock writes)."""
    kinds: dict[str, dict[str, float]] = defaultdict(lambda: {"stages": 0, "seconds": 0.0})
    for stage, seconds in timed:
        kind = kinds[stage.rpartition(":")[2].partition("@")[0]]  # fingerprint/dvc.yaml:env is `env`
        kind["stages"] += 1
        kind["seconds"] += seconds
    kinds["dvc"]["seconds"] = wall - sum(seconds for _, seconds in timed)
    return {k: {"stages": v["stages"], "seconds": round(v["seconds"], 1)}
            for k, v in sorted(kinds.items(), key=lambda kv: -kv[1]["seconds"])}  # fmt: skip


def where_the_time_went(kinds: dict[str, dict[str, float]]) -> str:
    """One line: `bench 9:12 (58), build 5:40 (58), ...` (stage kind, its wall clock, how many ran)."""
    return ", ".join(f"{kind} {_clock(v['seconds'])}" + (f" ({v['stages']:g})" if v["stages"] else "")
                     for kind, v in kinds.items())  # fmt: skip


def repro_with_progress(dvc_args: list[str], console: Console | None = None) -> int:
    console = console or Console(stderr=True)
    total = stage_count()
    console.print(f"dvc repro: {total} stage(s) to check; DVC's output: {LOG}")
    LOG.parent.mkdir(parents=True, exist_ok=True)
    started, done, current, stage_start = time.monotonic(), 0, "", time.monotonic()
    timed: list[tuple[str, float]] = []  # (`kind@item`, seconds) of each stage run
    with LOG.open("w") as log, Live(console=console, transient=True, refresh_per_second=2) as live:
        process = subprocess.Popen(
            ["dvc", "repro", *dvc_args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        assert process.stdout is not None
        for line in process.stdout:
            log.write(line)
            log.flush()
            running, unchanged = RUNNING.match(line), UNCHANGED.match(line)
            if running or unchanged:
                if current:
                    timed.append((current, time.monotonic() - stage_start))
                    done += 1
                current, stage_start = (short_name(running[1]), time.monotonic()) if running else ("", stage_start)
                done += bool(unchanged)
            elif line.startswith(("error:", "ERROR")):
                console.print(line.rstrip(), markup=False, highlight=False, soft_wrap=True)
            elif current and (result := RESULT.match(line)):  # the stage's one line: named by its DVC stage
                console.print(f"{current}: {result[1]}", markup=False, highlight=False, soft_wrap=True)
            if current:
                live.update(status_line(current, done, total, started, [seconds for _, seconds in timed]))
        code = process.wait()
        if current:
            timed.append((current, time.monotonic() - stage_start))
    wall = time.monotonic() - started
    kinds = time_by_kind(timed, wall)
    write_json(layout.repro_time(), kinds)
    console.print(
        f"dvc repro {'finished' if code == 0 else f'failed (exit {code})'} in {_clock(wall)}; log: {LOG}",
        soft_wrap=True,
    )
    if timed:
        console.print(f"where the time went: {where_the_time_went(kinds)}", soft_wrap=True)
    return code
