"""Does the contest's speed-up agree with what each artifact does alone, as deployed (issue 73)?

For each model of a built project (the zoo, or a corpus model's scratch project), its select stage's contenders
(the recorded contest's, or --variants) are timed three ways, every pair's ratio with its 95% interval:
  - workers: the select stage's contest, each contender in worker processes of its own, one block at a time
    (pipeline.measure.contest, `isolation: workers`);
  - one process: the same race with every contender loaded in one process (`isolation: one process`: what the
    select stage did before);
  - alone: each contender alone in a fresh process (load, `--warmup` s of calls, then `--seconds` s of timed
    calls: its p50), in turns A B .. B A over `--rounds` rounds; a round's ratio is the two p50s', the
    rounds' median and interval (pipeline.core.stats.paired_ratio_interval) the pair's figure.
Plus an A/A check: the first contender against itself, in two workers (its ratio reads 1.00 within its interval).
`--choices`: each model's select decision taken again with the contest held each way (workers, one process), with the
chosen variant's speed-up over the source's own runtime as the contest timed it and as the stored bench figures give it.
A pair agrees when its workers ratio lies within the alone ratio's interval or within 5% of it.

    python -m benchmarks.contest_agreement [--root PROJECT ...] [--rounds 6] [--choices] [MODEL ...]

Writes reports/benchmarks/contest_agreement.json (and .txt). Nothing else may run meanwhile. `--smoke`: a scratch
project of one tiny MatMul file built for ONNX Runtime and OpenVINO, 2 rounds of short runs (tests/test_benchmarks.py);
its figures mean nothing.
"""

from __future__ import annotations

import argparse
import itertools
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from benchmarks.smoke import SMOKE_SETTINGS, measured_where_and_when, notes, tiny_onnx, write_table, written_to
from pipeline.core import layout
from pipeline.core.config import PARAMS_FILE, load_params
from pipeline.core.data import sample_batch
from pipeline.core.files import read_json, write_json
from pipeline.core.isolate import call
from pipeline.core.stats import paired_ratio_interval
from pipeline.measure.stage import thread_env

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "reports" / "benchmarks" / "contest_agreement.json"
AGREE_PCT = 5.0


def alone_p50_ms(model: str, variant: str, root: str, warmup_s: float, seconds: float) -> float:
    """In a fresh process: load `variant` as the contest's worker does, `warmup_s` of untimed calls, then the
    p50 of `seconds` of timed calls."""
    from pipeline.measure.harness import clock
    from pipeline.measure.interleaved import own_figure_ns
    from pipeline.measure.loading import load_variant

    base = Path(root)
    loaded = load_variant(model, layout.variant_dir(model, variant, base), base)
    rows = loaded.reference.inputs
    from pipeline.core.records import source as source_record

    prepared = loaded.session.prepare(sample_batch(rows, source_record.load(model, base).fixed_batch or 1))
    end = clock() + warmup_s * 1e9
    while clock() < end:
        prepared()
    times, end = [], clock() + seconds * 1e9
    while not times or clock() < end:
        t0 = clock()
        result = prepared()
        times.append(own_figure_ns(result, clock() - t0))  # a generation: its per-token step, as the contest's
    return float(np.median(times)) / 1e6


def alone(model: str, variants: list[str], root: Path, rounds: int, warmup_s: float, seconds: float, threads: int):
    """Each variant alone in a fresh process, in turns (the order reversed every other round): per pair, the
    ratio of the two p50s round by round, and each variant's p50 per round."""
    p50: dict[str, list[float]] = {v: [] for v in variants}
    for r in range(rounds):
        for variant in variants if r % 2 == 0 else variants[::-1]:
            kwargs = {"model": model, "variant": variant, "root": str(root), "warmup_s": warmup_s, "seconds": seconds}
            p50[variant].append(at_root(root, "benchmarks.contest_agreement:alone_p50_ms", kwargs, threads))
    return p50


def at_root(root: Path, target: str, kwargs: dict[str, Any], threads: int) -> Any:
    """`target(**kwargs)` in a fresh process working in the project `root`, as its stages do (a PyTorch-code
    model's factory imports from there), with `threads` for the runtimes' pools."""
    wrapped = {"root": str(root), "target": target, "kwargs": kwargs}
    return call("benchmarks.contest_agreement:in_project", wrapped, timeout=1800, env=thread_env(threads))


def in_project(root: str, target: str, kwargs: dict[str, Any]) -> Any:
    import importlib
    import os
    import sys

    os.chdir(root)
    sys.path.insert(0, str(Path(root).resolve()))
    module, _, function = target.partition(":")
    return getattr(importlib.import_module(module), function)(**kwargs)


def contest(model: str, variants: list[str], root: Path, isolation: str, threads: int, config: dict) -> dict:
    """The select stage's contest on `variants`, held as `isolation` says, in a fresh coordinator process."""
    kwargs = {"model": model, "variants": variants, "percentile": "p50", "config": config | {"isolation": isolation},
              "root": str(Path(root).resolve())}  # fmt: skip
    return at_root(root, "pipeline.measure.contest:contest", kwargs, threads)


def pair_ratio(race: dict, a: str, b: str) -> dict[str, float] | None:
    """b's time over a's from a race's figures: its paired ratio to the leader, or the inverse."""
    ratios, leader = race["ratio_to_leader"], race["leader"]
    if leader == a and b in ratios:
        return {k: ratios[b][k] for k in ("ratio", "low", "high")}
    if leader == b and a in ratios:
        r = ratios[a]
        return {"ratio": inverse(r["ratio"]), "low": inverse(r["high"]), "high": inverse(r["low"])}
    if a in ratios and b in ratios:  # neither leads: the ratio of the medians (no interval)
        value = race["latency_ms"][b] / race["latency_ms"][a]
        return {"ratio": value, "low": value, "high": value}
    return None


def inverse(x: float) -> float:
    """1/x, where an interval with too few rounds to bound it reaches 0."""
    return 1 / x if x > 0 else float("inf")


def figures(interval: Any) -> dict[str, float]:
    return {"ratio": round(interval.center, 4), "low": round(interval.low, 4), "high": round(interval.high, 4)}


def agrees(contest_ratio: float, alone_ratio: dict[str, float]) -> bool:
    within = alone_ratio["low"] <= contest_ratio <= alone_ratio["high"]
    return within or abs(contest_ratio / alone_ratio["ratio"] - 1) * 100 <= AGREE_PCT


def one_model(model: str, variants: list[str], root: Path, args: argparse.Namespace, config: dict) -> dict:
    workers = contest(model, variants, root, "workers", args.threads, config)
    shared = contest(model, variants, root, "one process", args.threads, config)
    p50 = alone(model, variants, root, args.rounds, args.warmup, args.seconds, args.threads)
    pairs = {}
    for a, b in itertools.combinations(variants, 2):
        alone_ratio = figures(paired_ratio_interval(np.asarray(p50[b]) / np.asarray(p50[a])))
        in_workers, in_one = pair_ratio(workers, a, b), pair_ratio(shared, a, b)
        pairs[f"{b} / {a}"] = {
            "alone": alone_ratio,
            "workers": in_workers,
            "one process": in_one,
            "workers agree": bool(in_workers and agrees(in_workers["ratio"], alone_ratio)),
            "one process agrees": bool(in_one and agrees(in_one["ratio"], alone_ratio)),
        }
    twin = variants[0]
    request = {"model": model, "variant": twin, "root": str(Path(root).resolve()), "config": config}
    aa = at_root(root, "benchmarks.contest_agreement:a_a", request, args.threads)
    return {
        "variants": variants,
        "alone_p50_ms": {v: [round(x, 5) for x in s] for v, s in p50.items()},
        "pairs": pairs,
        "a_a": {"variant": twin, **aa},
        "workers_rounds": workers["rounds"],
        "one_process_rounds": shared["rounds"],
        "workers_seconds": workers["seconds"],
        "one_process_seconds": shared["seconds"],
    }


def a_a(model: str, variant: str, root: str, config: dict) -> dict[str, Any]:
    """The same artifact in two workers, raced as two contenders: its ratio should read 1.00 within its interval."""
    from pipeline.core.config import ContestConfig
    from pipeline.measure.contest import race_in_workers

    request = {"model": model, "folder": str(layout.variant_dir(model, variant, Path(root))), "root": root,
               "batch": 1, "config": config}  # fmt: skip
    race = race_in_workers({"A": request, "A'": request}, "p50", ContestConfig.model_validate(config))
    ratio = pair_ratio(race, "A", "A'") or {"ratio": float("nan"), "low": float("nan"), "high": float("nan")}
    return {**ratio, "holds_one": ratio["low"] <= 1 <= ratio["high"], "rounds": race["rounds"]}


def decide_as(model: str, root: str, isolation: str) -> dict[str, Any]:
    """The select stage's decision for `model` on the project's stored figures with the contest held as
    `isolation` says (the stage's code, no deploy folder written): what it chose, and the chosen variant's
    speed-up over the baseline, as the contest timed it and as the stored bench figures give it."""
    from pipeline.core import records
    from pipeline.core.registry import BASELINES
    from pipeline.decide.contest import decide

    base = Path(root)
    params = load_params(base / PARAMS_FILE)
    contest_config = params.select.contest.model_copy(update={"isolation": isolation})
    params = params.model_copy(update={"select": params.select.model_copy(update={"contest": contest_config})})
    found = records.load(model, base)
    decision = decide(model, found, params, base)
    baseline = BASELINES[params.model(model).source]
    chosen = decision.chosen
    bench = (
        found[baseline].p50_ms / found[chosen].p50_ms if chosen and found.get(baseline) and found[baseline].ok else None
    )
    return {
        "chosen": chosen,
        "tied": decision.tied,
        "baseline": baseline,
        "speedup_side_by_side": decision.speedups.get(chosen or ""),
        "speedup_bench": round(bench, 3) if bench else None,
        "why": decision.why,
    }


def contenders(model: str, root: Path) -> list[str]:
    """The variants the select stage raced for `model` (its manifest's contest), the leader first."""
    race = read_json(layout.deploy_dir(model, root) / layout.MANIFEST)["selection"].get("contest") or {}
    if not race:
        return []
    return [race["leader"], *race["ratio_to_leader"]]


def smoke_project() -> tuple[Path, str]:
    """A scratch project: one tiny MatMul file built as onnx_fp32 (ONNX Runtime) and openvino_fp32 (OpenVINO
    reads the ONNX file), with its reference rows; no pipeline run needed."""
    from pipeline.core.config import InputSpec
    from pipeline.core.data import DataSet, generate_inputs
    from pipeline.core.records import build, source

    root, model = Path(tempfile.mkdtemp(prefix="agreement-")), "tiny"
    entry = {"source": "onnx", "file": "model.onnx", "inputs": {"x": {"shape": ["batch", 16]}}}
    params = {"models": [model], "catalog": {model: entry}, "variants": {"onnx_fp32": {}, "openvino_fp32": {}}}
    (root / PARAMS_FILE).write_text(yaml.safe_dump(params | SMOKE_SETTINGS))
    onnx_file = tiny_onnx(root)
    folder = layout.source_dir(model, root)
    folder.mkdir(parents=True)
    record = {"model": model, "status": "ok", "output_names": ["y"], "export": {"status": "ok"}}
    source.write(source.SourceRecord.model_validate(record), folder)
    inputs = generate_inputs({"x": InputSpec.model_validate({"shape": ["batch", 16]})}, 4, seed=0)
    DataSet(inputs).save(folder / layout.REFERENCE)
    for variant, runtime in (("onnx_fp32", "onnxruntime"), ("openvino_fp32", "openvino")):
        artifact = layout.variant_dir(model, variant, root)
        artifact.mkdir(parents=True)
        shutil.copy(onnx_file, artifact / "model.onnx")
        fields = {"status": "ok", "kind": "ok", "variant": variant, "runtime": runtime, "precision": "fp32",
                  "entry": "model.onnx"}  # fmt: skip
        build.write(build.BuildRecord.model_validate(fields), artifact)
    return root, model


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", help="models of the project (default: every one with a contest)")
    parser.add_argument("--root", type=Path, action="append", help="a built project (default: this one; repeatable)")
    parser.add_argument("--variants", help="comma-separated contenders instead of the recorded contest's")
    parser.add_argument("--rounds", type=int, default=6, help="alone: rounds of fresh processes, in turns")
    parser.add_argument("--warmup", type=float, default=1.0, help="alone: seconds of untimed calls")
    parser.add_argument("--seconds", type=float, default=3.0, help="alone: seconds of timed calls")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--choices", action="store_true", help="also decide each model with the contest held each way")
    parser.add_argument("--resume", action="store_true", help="keep the models an interrupted run measured")
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    args.root = args.root or [REPO]
    if args.smoke:
        root, model = smoke_project()
        args.root = [root]
        args.models, args.variants, args.rounds, args.warmup, args.seconds = (
            [model],
            "onnx_fp32,openvino_fp32",
            2,
            0,
            0.05,
        )
    out = written_to(args.out, OUT, args.smoke)
    started = time.gmtime()
    partial = out.with_suffix(".partial.json")
    found = read_json(partial) if args.resume and partial.exists() else {}
    for root in args.root:
        params = load_params(root / PARAMS_FILE)
        config = params.select.contest.model_dump()
        for model in args.models or params.models:
            variants = args.variants.split(",") if args.variants else contenders(model, root)
            if model in found:  # --resume: measured by an earlier run
                continue
            if len(variants) < 2:
                print(f"{model}: no contest recorded (nothing within reach of the leader): skipped")
                continue
            found[model] = one_model(model, variants, root, args, config)
            if args.choices:
                found[model]["choices"] = {
                    way: at_root(root, "benchmarks.contest_agreement:decide_as", {"model": model, "root": str(
                        Path(root).resolve()), "isolation": way}, args.threads)
                    for way in ("one process", "workers")
                }  # fmt: skip
            write_json(out.with_suffix(".partial.json"), found)  # a model measured is kept, whatever comes next
    pairs = [p for m in found.values() for p in m["pairs"].values()]
    result = {
        **measured_where_and_when(started),
        "threads": args.threads,
        "how": f"workers / one process: the select stage's contest (params.yaml select.contest) with each contender "
        f"in its own worker process, or all in one; alone: each in a fresh process, {args.warmup:g} s warm-up then "
        f"{args.seconds:g} s of timed calls (p50), in turns over {args.rounds} rounds; a pair agrees when the "
        f"workers ratio lies in the alone ratio's 95% interval or within {AGREE_PCT:g}% of it; A/A: the first "
        "contender against itself in two workers",
        "agree": {
            "workers": sum(p["workers agree"] for p in pairs),
            "one process": sum(p["one process agrees"] for p in pairs),
            "pairs": len(pairs),
        },
        "models": found,
    }
    lines = [f"{'model':<16} {'pair':<40} {'alone':>22} {'workers':>22} {'one process':>22}"]
    for model, row in found.items():
        for pair, p in row["pairs"].items():
            cells = [cell(p[w]) for w in ("alone", "workers", "one process")]
            marks = "" if p["workers agree"] else "  (workers disagree)"
            lines.append(f"{model[:16]:<16} {pair[:40]:<40} {cells[0]:>22} {cells[1]:>22} {cells[2]:>22}{marks}")
        a = row["a_a"]
        lines.append(f"{model[:16]:<16} {'A/A ' + a['variant']:<40} {'':>22} {cell(a):>22}")
    agree = result["agree"]
    lines += notes(
        f"{agree['workers']} of {agree['pairs']} pairs agree in workers, {agree['one process']} in one process.",
        f"{result['machine']}, {result['measured_utc']}; {args.threads} threads each; {result['how']}.",
    )
    write_table(out, result, lines)
    partial.unlink(missing_ok=True)


def cell(r: dict[str, float] | None) -> str:
    return f"x{r['ratio']:.3f} ({r['low']:.3f}-{r['high']:.3f})" if r else "-"


if __name__ == "__main__":
    main()
