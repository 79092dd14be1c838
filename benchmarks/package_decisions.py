"""What each package's own post-processing decides on a variant's outputs, against what it decides on the FP32
source's outputs for the same rows (issue 64): the check, by hand, behind the pipeline's readings, for every
corpus model (a detector's boxes after its decode and NMS, a face's mesh, a recognised line, a wake word, a
speaker, a note; benchmarks/package_readers.py, one reader per package, each following the package's code).
Every variant built in a kept project is run on the scoring rows (held out from calibration, as the bench stage
scores them), and beside the package's figures stand the pipeline's verdict on the same outputs with this
checkout's readings and the project's constraints.

Two steps, in two environments: the variants run in the project's (their runtimes: OpenVINO, ONNX Runtime,
LiteRT), the packages' post-processing in the corpus venv (where the packages are installed).

    python -m benchmarks.foreign_models CORPUS --only NAME --keep        # prints the kept project
    python -m benchmarks.package_decisions outputs PROJECT NAME DIR      # DIR/NAME/<variant>.npz and readings.json
    CORPUS/venv/bin/python -m benchmarks.package_decisions decide NAME DIR/NAME --corpus CORPUS   # the figures

A model given as PyTorch code loads it from the project's models/: run `outputs` from inside PROJECT, as
`python REPO/benchmarks/package_decisions.py outputs ...` (the repository's own models/ would shadow it).
`table` prints the figures as docs/results.md shows them.
Writes reports/benchmarks/package_decisions.json (by model; `--out` elsewhere). `--smoke` decides on a made-up
pair of landmark outputs (one face moved 3 px), through the same code (tests/test_benchmarks.py).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

OUT = Path(__file__).resolve().parents[1] / "reports" / "benchmarks" / "package_decisions.json"


def outputs(project: Path, name: str, out: Path) -> None:
    """Every variant built in `project` for model `name`, run on the export's scoring rows (their FP32 outputs
    beside): DIR/NAME/<variant>.npz each, and readings.json: each variant's outputs judged by this checkout's
    readings (pipeline.core.evaluate) under the project's constraints (`readings_verdict`: the outputs alone, no
    task metric), and the pipeline's own verdict in that project (`feasible`, `verdict`: its select report)."""
    from pipeline.core import layout
    from pipeline.core.config import load_params
    from pipeline.core.data import run_batched
    from pipeline.core.evaluate import Judging, fidelity_block
    from pipeline.core.quality import quality_violations
    from pipeline.core.records import Measured, build
    from pipeline.measure.loading import load_variant

    params = load_params(project / "params.yaml")
    config, constraints = params.model(name), params.select.constraints_for(name)
    folder = out / name
    folder.mkdir(parents=True, exist_ok=True)
    selection = json.loads((project / "reports" / "selection" / f"{name}.json").read_text())
    verdicts = {"deployed": selection.get("chosen"), "variants": {}}
    for artifact in sorted((project / "artifacts" / name).iterdir()):
        if not artifact.is_dir() or artifact.name == "source" or build.load(artifact).status != "ok":
            continue
        loaded = load_variant(name, layout.variant_dir(name, artifact.name, project), project)
        rows = loaded.reference
        got = run_batched(loaded.session.run, rows.inputs, config.fixed_batch or 16, config.fixed_batch is not None)
        saved = {f"source:{k}": v for k, v in rows.outputs.items()} | {f"variant:{k}": got[k] for k in rows.outputs}
        places = eval_rows(project / layout.model_dir(name) / (config.eval_data or ""), rows.inputs)
        np.savez(folder / f"{artifact.name}.npz", variant=artifact.name, names=np.array(list(rows.outputs)),
                 eval_rows=places, **saved)  # fmt: skip
        fidelity = fidelity_block(rows.outputs, got, judging=Judging.of(config))
        broken = [v.message for v in quality_violations(Measured(fidelity=fidelity), constraints)]
        feasible = selection["figures"].get(artifact.name, {}).get("feasible", False)
        why_not = selection["rejected"].get(artifact.name, "not measured")
        verdicts["variants"][artifact.name] = {
            "feasible": feasible,
            "verdict": "meets the constraints" if feasible else why_not,
            "readings": {o: [f["output_kind"], f["kind_from"]] for o, f in fidelity.items()},
            "readings_verdict": "; ".join(broken) or "meets the constraints",
            "rows": len(rows),
        }
        print(f"{name} {artifact.name}: {verdicts['variants'][artifact.name]['verdict'][:200]}")
    (folder / "readings.json").write_text(json.dumps(verdicts, indent=1) + "\n")


def eval_rows(eval_file: Path, inputs: dict[str, np.ndarray]) -> np.ndarray:
    """Which rows of the eval file the scoring rows are (by their first input, rows first), so that a reader can
    name them by what the corpus README lists; empty where the file or a row is not found."""
    if not eval_file.is_file():
        return np.array([], int)
    name, scoring = next(iter(inputs.items()))
    with np.load(eval_file) as data:
        pool = data.get(name)
    if pool is None or pool.shape[1:] != scoring.shape[1:]:
        return np.array([], int)
    flat, places = pool.reshape(len(pool), -1), []
    for row in scoring:  # the scoring rows keep the file's order: of equal rows, the first after the last found
        same = np.flatnonzero((flat == row.reshape(1, -1)).all(1))
        if not len(same):
            return np.array([], int)
        later = same[same > (places[-1] if places else -1)]
        places.append(int((later if len(later) else same)[0]))
    return np.array(places, int)


def decide_all(name: str, folder: Path, model_dir: Path | None = None) -> dict[str, Any]:
    """The package's decisions for every variant saved in `folder`, beside the pipeline's verdict on it."""
    verdicts = json.loads((folder / "readings.json").read_text())
    found = {"model": name, "deployed": verdicts["deployed"], "variants": {}}
    for saved in sorted(folder.glob("*.npz")):
        figures = decide(name, saved, model_dir)
        found["variants"][saved.stem] = {k: v for k, v in figures.items() if k not in ("model", "variant")} | {
            "pipeline": verdicts["variants"][saved.stem]
        }
    return found


def decide(name: str, saved: Path, model_dir: Path | None = None) -> dict[str, Any]:
    """The package's decisions on the source's outputs and on the variant's (benchmarks.package_readers)."""
    from benchmarks.package_readers import READERS, Pair

    if name not in READERS:
        raise SystemExit(f"{name}: no package post-processing here (benchmarks/package_readers.py)")
    with np.load(saved) as data:
        names = [str(n) for n in data["names"]]
        rows = data["eval_rows"] if "eval_rows" in data else np.array([], int)
        pair = Pair({n: data[f"source:{n}"] for n in names}, {n: data[f"variant:{n}"] for n in names}, model_dir, rows)
        variant = str(data["variant"])
    return {"model": name, "variant": variant, "outputs": names} | READERS[name](pair)


def smoke(out: Path) -> None:
    """A made-up landmark pair through `decide_all` (numpy only: runs in the project's venv)."""
    rng = np.random.default_rng(0)
    mesh = rng.uniform(40, 150, size=(4, 1, 1, 1404))
    moved = mesh.copy()
    moved[2, ..., 0] += 3.0  # one point of one face, 3 px
    presence = np.full((4, 1, 1, 1), 5.0)
    folder = out.parent / "mediapipe_face_landmark"
    folder.mkdir(parents=True, exist_ok=True)
    np.savez(folder / "smoke.npz", variant="smoke", names=np.array(["mesh", "presence"]), **{"source:mesh": mesh,
             "source:presence": presence, "variant:mesh": moved, "variant:presence": presence})  # fmt: skip
    pipeline = {"feasible": True, "verdict": "smoke", "readings": {"mesh": ["points", "smoke"]}, "rows": 4}
    (folder / "readings.json").write_text(json.dumps({"deployed": "smoke", "variants": {"smoke": pipeline}}))
    figures = decide_all("mediapipe_face_landmark", folder)
    smoked = figures["variants"]["smoke"]
    assert smoked["rows_over_2px"] == 1 and smoked["max_px"] == 3.0, figures
    record(figures, out)
    shown = table(json.loads(out.read_text()))
    assert "`smoke`: max 3.00 px, 1 of 4 over 1 px | **no** |" in shown, shown  # 3 of 4 faces keep every point


def record(figures: dict[str, Any], out: Path) -> None:
    """Into `out` (JSON by model), beside the models decided before; printed."""
    found = json.loads(out.read_text()) if out.exists() else {}
    found[figures["model"]] = figures
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(found, indent=1, default=str) + "\n")
    print(json.dumps(figures, default=str))


def brief(figures: dict[str, Any]) -> str:
    """One variant's by-hand figure in a few words."""
    if "detection_f1" in figures:
        f1 = "-" if figures["detection_f1"] is None else f"{figures['detection_f1']:.3f}"
        return f"detection F1 {f1} ({figures['matched']} of {figures['detections_source']} matched)"
    if "note_f1" in figures:
        return f"note F1 {figures['note_f1']:.3f} ({figures['notes_source']} notes)"
    if "max_px" in figures:
        flips = sum(figures.get(k, 0) for k in ("presence_flips", "handedness_flips"))
        return f"max {figures['max_px']:.2f} px, {figures['rows_over_1px']} of {figures['rows']} over 1 px" + (
            f", {flips} flips" if flips else ""
        )
    if "start_flips" in figures:
        return f"{figures['start_flips']} start and {figures['end_flips']} end flips of {figures['chunks']} chunks"
    what = next(k.removesuffix("_changed") for k in figures if k.endswith("_changed"))
    return f"{figures[what + '_changed']} of {figures[what]} {what} changed"


def table(found: dict[str, Any]) -> str:
    """Markdown: per model, the deployed variant's by-hand figure, and where the pipeline and the package part."""
    header = (
        "| model | the package reads | deployed: by hand | >= 0.99 | passed, package breaks | rejected, package keeps |"
    )
    lines = [header, "|---|---|---|---|---|---|"]
    for name, model in sorted(found.items()):
        variants, deployed = model["variants"], model["deployed"]
        passes = {v: f["pipeline"]["feasible"] for v, f in variants.items()}
        good = {v: f["kept"] is not None and f["kept"] >= 0.99 for v, f in variants.items()}
        mine = variants.get(deployed)
        shown = f"`{deployed}`: {brief(mine)}" if mine else f"`{deployed}`: the source itself (not built as a variant)"
        bar = ("yes" if good[deployed] else "**no**") if mine else "yes"
        missed = ", ".join(f"`{v}`" for v in variants if passes[v] and not good[v]) or "none"
        strict = ", ".join(f"`{v}`" for v in variants if not passes[v] and good[v]) or "none"
        reads = next(iter(variants.values()))["reads"] if variants else ""
        lines.append(f"| {name} | {reads} | {shown} | {bar} | {missed} | {strict} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="a made-up landmark pair through decide, nothing else")
    parser.add_argument("--out", type=Path, help=f"where the figures go (default {OUT.relative_to(OUT.parents[2])})")
    commands = parser.add_subparsers(dest="command", required=False)
    run = commands.add_parser("outputs", help="source and deployed outputs on every eval row (the project's venv)")
    run.add_argument("project", type=Path)
    run.add_argument("name")
    run.add_argument("saved_to", metavar="DIR", type=Path)
    read = commands.add_parser("decide", help="the package's decisions on each variant (the corpus venv)")
    read.add_argument("name")
    read.add_argument("saved", metavar="DIR/NAME", type=Path)
    read.add_argument("--corpus", type=Path, help="the corpus folder (a reader may need what its README lists)")
    commands.add_parser("table", help="the figures as a markdown table (docs/results.md)")
    args = parser.parse_args(argv)
    if args.smoke:
        return smoke(args.out or Path(tempfile.mkdtemp()) / "smoke.json")
    if args.command == "outputs":
        outputs(args.project, args.name, args.saved_to)
    elif args.command == "table":
        print(table(json.loads((args.out or OUT).read_text())))
    elif args.command == "decide":
        model_dir = args.corpus / args.name if args.corpus else None
        record(decide_all(args.name, args.saved, model_dir), args.out or OUT)
    else:
        parser.error("a command: outputs, decide or table (or --smoke)")


if __name__ == "__main__":
    main()
