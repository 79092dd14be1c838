"""A contest worker that speaks pipeline.measure.contest_worker's protocol over a runtime whose speed the test
sets, and writes down when each of its blocks started and ended (the coordinator must never overlap two).

    python tests/stub_contest_worker.py REQUEST_JSON   (request: name, log, per_call_s, and optionally
    die_at_block: exits without an answer at that block, as a crashed runtime does; fail_load: refuses to load;
    draws: a call's seconds in each process of this contender, in the order they start, instead of per_call_s:
    the speed a process draws at start)
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.core.line_process import answer_on, reply


def busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def drawn(request: dict) -> float:
    """This process's call time: the next of the contender's `draws` (a counter file shared by its processes)."""
    if "draws" not in request:
        return request["per_call_s"]
    with open(f"{request['log']}.{request['name']}.started", "a+") as counter:
        fcntl.flock(counter, fcntl.LOCK_EX)
        counter.seek(0)
        started = len(counter.read().split())
        counter.write("x\n")
    return request["draws"][started % len(request["draws"])]


def main(request: dict) -> None:
    channel = answer_on()
    per_call_s = drawn(request)
    if request.get("fail_load"):
        print("RuntimeError: cannot load this file", file=sys.stderr)
        reply(channel, {"error": "RuntimeError: cannot load this file"})
        return
    reply(channel, {"runtime": {"stub": request["name"]}, "load_ms": 1.0})
    log, blocks = Path(request["log"]), 0
    for line in sys.stdin:
        verb, _, argument = line.strip().partition(" ")
        if verb == "warm":
            reply(channel, {"per_call_s": per_call_s, "settle_s": 0.0})
            continue
        blocks += 1
        if blocks == request.get("die_at_block"):
            print("Segmentation fault in the stub runtime", file=sys.stderr)
            os._exit(139)
        start = time.perf_counter_ns()  # CLOCK_MONOTONIC: one clock for every process on the machine
        times = []
        for _ in range(int(argument)):
            t0 = time.perf_counter_ns()
            busy(per_call_s)
            times.append(time.perf_counter_ns() - t0)
        with log.open("a") as out:
            out.write(f"{request['name']} {start} {time.perf_counter_ns()}\n")
        reply(channel, {"ns": times, "settle_s": 0.0})


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
