"""Time several variants of one model side by side: the measurement a ranking can trust.

Figures taken minutes apart drift with the machine (one INT8 artifact read 3.8 ms, then 2.4 ms, while FP32 held
still), but the ratio of two variants timed in alternating blocks of calls holds (0.628-0.637 in every 15 s
window while both moved 10%). So each round times one block of every contender, in an order that turns each
round (A B C, C B A, B C A, A C B ...: `turn`), with a few untimed calls first so that each block starts warm. A
round gives each contender's ratio to the leader; the rounds give the median ratio and its interval
(pipeline.core.stats.paired_ratio_interval: the median's order-statistic interval, as rounds that straddle one
of the machine's speed flips are outliers a mean's t interval did not ignore, joined with an interval over five
stretches of the contest, as a ratio that moves with the machine's state must not look precise). The loop stops
when every contender is separated from the leader or equivalent to it (within ±tie_pct), after min_rounds
(cap_min_rounds for a race too slow to reach min_rounds within max_seconds) and min_seconds, or at the round or
time limit (a tie), or then already once no open one could close by that limit (its interval narrowed to the
rounds the cap would allow: `cannot_close`); or, after `decisive_rounds`, as soon as every contender's interval
starts above `decisive_ratio`: a gap no drift of the machine has spanned needs no minute of watching
(ResNet-50's INT8 against its BF16 at 1.8x ran the 30 s cap for 49 rounds). One contender so far behind while
others are still open leaves the race then (`retired`): its ratio and its verdict are those of the rounds it
ran, and the rounds after it cost the others' blocks alone (genomad's XGBoost baseline, x78 of the leader, had
run all 100 rounds of a contest of four). Blocks are short (tens of ms) so that most rounds fall inside one
machine state, with a minimum of calls so that a fast model's block is not all switching cost, and at most
`max_block_seconds` (one call at least) so that a slow model (VGG19, 140 ms a call) still gets rounds: its time
cap also waits for `cap_min_rounds` rounds, up to `cap_max_seconds`.

Where each contender runs is the caller's: the select stage gives each worker processes of its own, as it is
deployed, two taking turns round by round, as each process draws its speed at start
(pipeline.measure.contest.Draws); a ratio is 'slower' only beyond the largest ratio between two processes of one
contender (`draw_spread`), and the decisive gap is that much wider too. `InProcess` times a prepared call in this
process (the tests' stubs, and benchmarks/contest_agreement.py's "one process" way, which shows why the select stage
no longer does it: in one process the runtimes move each other's figures). Either way each block measures its
contender alone: a runtime's thread pool spins for a while after a call (ONNX Runtime's intra-op threads, OpenVINO's
TBB workers, XNNPACK's pthreadpool), and on 2 cores that spinning taxed the next contender's block (an OpenVINO
block 12% slower right after an ONNX Runtime block than after a pause). So after every block its process waits until
it is quiet (`settle`, with the contest's `quiet_*` settings), and the record says how long each contender's pool
took (`separation`). A contender whose worker fails mid-contest leaves the race with its error (`failed`); the
others go on."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import numpy as np

from pipeline.core.config import ContestConfig
from pipeline.core.line_process import WorkerFailed
from pipeline.core.stats import Interval, paired_ratio_interval
from pipeline.measure.harness import clock, no_gc, seconds_per_call

PERCENTILES = {"p50": 50, "p90": 90, "p99": 99}
WARM_CALLS = 2  # untimed calls at the start of every block: caches and thread pools after the switch


def settle(settings: ContestConfig) -> float:
    """Wait until this process's threads have stopped spinning after a block and stayed stopped: its CPU time
    (every thread's, as CLOCK_PROCESS_CPUTIME_ID counts it: the sum /proc/<pid>/stat gives, in nanoseconds
    rather than 10 ms ticks) grows by less than `quiet_share` of one core in every `quiet_window_s` for
    `quiet_for_s` seconds, or `settle_cap_s` pass. Returns the seconds waited: how long the last runtime's pool
    kept spinning, plus `quiet_for_s`. The quiet stretch is measured, not guessed: on a 2-core Zen 5 an
    OpenVINO block right after ONNX Runtime's ran 39% slow when the process had been quiet for one window
    (ONNX Runtime's pool had stopped within 4 ms) and still after 10 ms, as after a 300 ms pause from 30 ms on
    (benchmarks/contest_separation.py, docs/results.md)."""
    start = quiet_since = time.perf_counter()
    while True:
        cpu, wall = time.process_time(), time.perf_counter()
        time.sleep(settings.quiet_window_s)
        now = time.perf_counter()
        if time.process_time() - cpu >= settings.quiet_share * (now - wall):
            quiet_since = now  # still spinning: the quiet stretch starts again
        if now - quiet_since >= settings.quiet_for_s or now - start >= settings.settle_cap_s:
            return now - start


def own_figure_ns(result: Any, wall_ns: int) -> int:
    """What one call contributes: its wall clock, or for a generation (pipeline.runtimes.generator) the
    median of its per-token steps. A decoder's p50 is its time per output token, so the contest ranks
    what the screen ranks: timing whole short replies added ONNX Runtime GenAI's per-call cost to one
    side (tiny_lm: `lm_openvino_fp32` x2.3 faster a reply, 1.8x slower a token)."""
    steps = getattr(result, "step_s", None)
    return int(np.median(steps) * 1e9) if steps else wall_ns


def timed_block(call: Callable[[], Any], calls: int) -> np.ndarray:
    """One block: up to WARM_CALLS untimed calls, then `calls` timed ones; each call's figure in ns."""
    times = np.empty(calls, dtype=np.int64)
    for _ in range(min(WARM_CALLS, calls)):
        call()
    for i in range(calls):
        t0 = clock()
        result = call()
        wall = clock() - t0
        times[i] = own_figure_ns(result, wall)
        del result
    return times


class Contender(Protocol):
    """One variant in the race: how long a call takes (to size its blocks), and one block on demand."""

    per_call_s: float

    def block(self, calls: int) -> tuple[np.ndarray, float]:
        """Run one block of `calls` timed calls; each call's figure in ns, and the seconds its process took to
        go quiet after it (settle). Raises WorkerFailed when the contender can no longer run."""
        ...

    def draw_ms(self) -> list[float]:
        """Each of its processes' median block figure (one process, or none of its own: at most one figure)."""
        ...


class InProcess:
    """A prepared, warmed-up call timed in this process."""

    def __init__(self, call: Callable[[], Any], settings: ContestConfig) -> None:
        self.call, self.settings = call, settings
        self.per_call_s = seconds_per_call(call)

    def block(self, calls: int) -> tuple[np.ndarray, float]:
        return timed_block(self.call, calls), settle(self.settings)

    def draw_ms(self) -> list[float]:
        return []


def verdict(interval: Interval, tie_pct: float, spread: float = 1.0) -> str:
    """'slower' when the ratio (contender / leader) is above 1 + tie_pct, and above `spread` (draw_spread), at
    the interval's confidence; 'equivalent' when the whole interval lies within ±tie_pct of 1; else 'open'."""
    if interval.low > max(1 + tie_pct / 100, spread):
        return "slower"
    if interval.low >= 1 - tie_pct / 100 and interval.high <= 1 + tie_pct / 100:
        return "equivalent"
    return "open"


def draw_spread(contenders: Mapping[str, Contender]) -> float:
    """The largest ratio between two processes of one contender (their median block figures, timed in the same
    rounds): how far a process's draw alone moved one artifact's figure, here and now (1: no contender has two
    processes). A ratio between contenders within it says nothing of which is faster."""
    return max((max(d) / min(d) for c in contenders.values() if len(d := c.draw_ms()) > 1), default=1.0)


def rank(
    block_stats: dict[str, list[float]], tie_pct: float, spread: float = 1.0
) -> tuple[str, dict[str, Interval], dict[str, str]]:
    """The leader, each other's ratio to it, and verdicts. The leader has the lowest median over the
    rounds of its block figure relative to the round's geometric mean (robust, as the ratios are)."""
    logs = np.log(np.array(list(block_stats.values()), dtype=np.float64))
    relative = np.median(logs - logs.mean(axis=0), axis=1)
    leader = min(zip(relative, block_stats, strict=True), key=lambda pair: (pair[0], pair[1]))[1]
    ratios = {
        v: paired_ratio_interval(np.asarray(s) / np.asarray(block_stats[leader]))
        for v, s in block_stats.items()
        if v != leader
    }
    return leader, ratios, {v: verdict(r, tie_pct, spread) for v, r in ratios.items()}


def block_calls(per_call_s: float, settings: ContestConfig) -> int:
    """Calls in one block: `block_seconds` worth, at least `min_block_calls`, at most `max_block_seconds`
    worth (and never fewer than one)."""
    wanted = max(settings.min_block_calls, int(settings.block_seconds / per_call_s))
    return max(1, min(wanted, int(settings.max_block_seconds / per_call_s)))


def out_of_time(rounds: int, elapsed: float, settings: ContestConfig) -> bool:
    """The round limit, or the time cap once `cap_min_rounds` have run (a slow model's time cap
    stretches to `cap_max_seconds` for them)."""
    if rounds >= settings.max_rounds or elapsed >= settings.cap_max_seconds:
        return True
    return elapsed >= settings.max_seconds and rounds >= settings.cap_min_rounds


def rounds_at_cap(rounds: int, elapsed: float, settings: ContestConfig) -> float:
    """How many rounds the race would have run at its cap, at its pace so far."""
    paced = rounds * max(settings.max_seconds, elapsed) / max(elapsed, 1e-9)
    return min(settings.max_rounds, max(paced, settings.cap_min_rounds, rounds))


def cannot_close(ratio: Interval, rounds: int, at_cap: float, tie_pct: float, spread: float = 1.0) -> bool:
    """An open ratio that would still be open at the cap: its interval, narrowed as 1/sqrt(rounds) from `rounds` to
    `at_cap` about the same median (optimistic: the drift stretches' part narrows slower), could neither start
    above 1 + tie_pct (and `spread`) nor fit within ±tie_pct. Such a race ends now, its open ones read as the cap
    reads them (pipeline.decide.contest.standing): yasa's LightGBM against lleaves ran the 30 s cap at x1.20
    (0.86-1.42). An interval not known yet (too few rounds for one: 0 to infinity) says nothing of where it would
    end."""
    if not 0 < ratio.low <= ratio.high < np.inf:
        return False
    center, low, high = np.log([ratio.center, ratio.low, ratio.high])
    half = (high - low) / 2 * np.sqrt(rounds / at_cap)
    band = tie_pct / 100
    separates = center - half > max(np.log1p(band), np.log(spread))
    fits = center - half >= np.log1p(-band) and center + half <= np.log1p(band)
    return not (separates or fits)


def rounds_needed(rounds: int, elapsed: float, settings: ContestConfig) -> int:
    """The rounds a contest must run before its verdicts count: `min_rounds`, or `cap_min_rounds` for a
    slow race whose pace cannot reach `min_rounds` within `max_seconds` (tiny_lm's generation, 0.35 s a
    round: 85 rounds in 30 s, so it ran to the cap with every verdict long decided)."""
    pace = elapsed / max(rounds, 1)
    return settings.min_rounds if pace * settings.min_rounds <= settings.max_seconds else settings.cap_min_rounds


def turn(variants: list[str], round_index: int) -> list[str]:
    """Round `round_index`'s order: rotated by one every two rounds and reversed every other round (A B, B A,
    B A, A B for two; all six orders in six rounds for three), so each contender opens a round as often as the
    others. Rotating every round and reversing every other cancels out for two contenders (A B every round):
    the first one always ran right after the coordinator's own work between rounds, and an A/A pair of
    silero_vad's 2 MB ONNX file read x0.948 (0.915-0.968) so."""
    shift = (round_index // 2) % len(variants)
    order = variants[shift:] + variants[:shift]
    return order[::-1] if round_index % 2 else order


def paired(slower: list[float], faster: list[float]) -> Interval:
    """The ratio of two contenders' block figures over the rounds both ran (a retired one ran the first ones)."""
    rounds = min(len(slower), len(faster))
    return paired_ratio_interval(np.asarray(slower[:rounds]) / np.asarray(faster[:rounds]))


def interval_figures(interval: Interval) -> dict[str, float]:
    return {"ratio": interval.center, "low": interval.low, "high": interval.high}


def race(
    contenders: Mapping[str, Contender | Callable[[], Any]],
    percentile: str,
    settings: ContestConfig,
    baseline: str | None = None,
    failed: dict[str, str] | None = None,
    where: str = "loaded in one process",
) -> dict[str, Any]:
    """The interleaved rounds (see the module's docstring) over contenders ready to time (a bare call is
    timed in this process). `baseline`, when it is one of them: every other's speed-up over it, paired
    round by round (`speedup`). `failed`: contenders that never started, with why (kept in the record beside
    those that fail here). `where`: how the contenders were held, for the record."""
    racing: dict[str, Contender] = {
        v: c if hasattr(c, "block") else InProcess(c, settings)  # type: ignore[arg-type]
        for v, c in contenders.items()
    }
    held = dict(racing)  # every contender's processes, those that leave the race too: what draw_spread reads
    failed = dict(failed or {})
    per_block = {v: block_calls(c.per_call_s, settings) for v, c in racing.items()}
    q = PERCENTILES[percentile]
    stats: dict[str, list[float]] = {v: [] for v in racing}
    settled: dict[str, list[float]] = {v: [] for v in racing}  # seconds each block's pool spun after it
    retired: dict[str, list[float]] = {}  # left the race decided beyond any drift: the rounds they ran
    with no_gc():
        start, rounds, stopped_by = clock(), 0, ""
        while len(racing) > 1:
            for variant in turn(list(racing), rounds):
                try:
                    times, waited = racing[variant].block(per_block[variant])
                except WorkerFailed as error:
                    failed[variant] = f"failed in round {rounds + 1}: {error}"
                    del racing[variant], stats[variant], settled[variant]
                    continue
                stats[variant].append(float(np.percentile(times, q)) / 1e6)
                settled[variant].append(waited)
            complete = min(len(s) for s in stats.values()) if stats else 0
            for s in stats.values():  # a round a contender failed in pairs the others' blocks up to it
                del s[complete:]
            rounds = complete
            if len(racing) < 2:
                stopped_by = "fewer than two contenders left running"
                break
            elapsed = (clock() - start) / 1e9
            long_enough = rounds >= rounds_needed(rounds, elapsed, settings) and elapsed >= settings.min_seconds
            if long_enough or rounds >= settings.decisive_rounds:
                spread = draw_spread(held)
                _, ratios, verdicts = rank(stats, settings.tie_pct, spread)
                gap = settings.decisive_ratio * spread  # beyond any drift, and any process's draw
                beyond = [v for v, r in ratios.items() if r.low > gap]
                if len(beyond) == len(ratios):
                    stopped_by = f"every contender slower by more than x{gap:.3g} ({rounds} rounds)"
                    break
                for variant in beyond if rounds >= settings.decisive_rounds else []:
                    retired[variant] = stats.pop(variant)
                    del racing[variant]
                if long_enough and "open" not in verdicts.values():
                    stopped_by = "every contender separated from the leader or equivalent to it"
                    break
                at_cap = rounds_at_cap(rounds, elapsed, settings)
                if long_enough and all(cannot_close(ratios[v], rounds, at_cap, settings.tie_pct, spread)
                                       for v, said in verdicts.items() if said == "open"):  # fmt: skip
                    stopped_by = (f"the open ones could not close by the cap (their intervals narrowed to"
                                  f" {at_cap:.0f} rounds, {rounds} run): as at the cap, ties or undecided")  # fmt: skip
                    break
            if out_of_time(rounds, elapsed, settings):
                stopped_by = f"round limit ({rounds} rounds, {elapsed:.1f} s): the open ones are ties"
                break
    stats = {v: s for v, s in stats.items() if s}
    if not stats:
        raise WorkerFailed("no contender ran a block: " + "; ".join(f"{v}: {why}" for v, why in failed.items()))
    spread = draw_spread(held)
    leader, ratios, verdicts = rank(stats, settings.tie_pct, spread)
    for variant, figures in retired.items():  # against the leader's blocks of the same rounds
        ratios[variant] = paired(figures, stats[leader])
        verdicts[variant] = verdict(ratios[variant], settings.tie_pct, spread)
    ran = stats | retired
    speedup = {}
    if baseline in ran:
        speedup = {v: interval_figures(paired(ran[baseline], s)) for v, s in ran.items()}
    return {
        "leader": leader,
        "percentile": percentile,
        "rounds": rounds,
        "seconds": round((clock() - start) / 1e9, 3),
        "stopped_by": stopped_by,
        "calls_per_block": {v: per_block[v] for v in ran},
        "latency_ms": {v: float(np.median(s)) for v, s in ran.items()},
        "ratio_to_leader": {v: interval_figures(r) | {"verdict": verdicts[v]} for v, r in ratios.items()},
        "retired": {v: len(s) for v, s in retired.items()},  # left after this many rounds, beyond any drift
        "draw_ms": {v: c.draw_ms() for v, c in held.items() if v in ran and len(c.draw_ms()) > 1},
        "draw_spread": round(spread, 4),
        **({"baseline": baseline, "speedup": speedup} if speedup else {}),
        "failed": failed,
        "separation": {
            "how": f"after every block, its process waited until its CPU time grew by under {settings.quiet_share:g}"
            f" of one core in every {settings.quiet_window_s * 1e3:g} ms for {settings.quiet_for_s * 1e3:g} ms (its"
            f" threads quiet), at most {settings.settle_cap_s * 1e3:g} ms; only then did the next block start",
            "settle_ms": {v: round(float(np.median(s)) * 1e3, 2) for v, s in settled.items() if s},
            "capped_blocks": {v: int(sum(w >= settings.settle_cap_s for w in s)) for v, s in settled.items() if s},
        },
        "how": (
            f"{len(per_block)} variants {where}, {rounds} rounds of one block each"
            f" (~{settings.block_seconds:g} s, at most {settings.max_block_seconds:g} s; up to {WARM_CALLS} untimed"
            f" calls first) in turning order, one block at a time, each after the last one's process went quiet"
            f" (separation); block {percentile}s; median contender/leader ratio over the rounds, its 95% interval"
            f" the order statistics' joined with a t interval over 5 stretches of the contest;"
            f" equivalent within ±{settings.tie_pct:g}%; slower once it starts above x{1 + settings.tie_pct / 100:g}"
            f" and above the draw spread (x{spread:.3f}: the largest ratio between two processes of one contender);"
            f" decided early once every interval starts above x{settings.decisive_ratio:g} times the draw spread"
            f" (after {settings.decisive_rounds} rounds), and a contender whose interval does so leaves the race then"
            f" (its figures over the rounds it ran)"
        ),
    }
