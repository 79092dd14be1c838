"""What each package's own post-processing decides on a variant's outputs, against what it decides on the FP32
source's outputs for the same rows (issue 64): the check, by hand, behind the pipeline's readings, for the corpus
models whose decision is no operator in the graph (a detector's boxes after its decode and NMS, a face's mesh, a
hand's presence and handedness, a CAPTCHA's string). Every variant built in a kept project is run on the scoring
rows (held out from calibration, as the bench stage scores them), and beside the package's figures stand the
pipeline's verdict on the same outputs with this checkout's readings and the project's constraints.

Two steps, in two environments: the variants run in the project's (their runtimes: OpenVINO, ONNX Runtime,
LiteRT), the packages' post-processing in the corpus venv (ddddocr, the makers' decoders of MediaPipe's graphs).

    python -m benchmarks.foreign_models CORPUS --only NAME --keep        # prints the kept project
    python -m benchmarks.package_decisions outputs PROJECT NAME DIR      # DIR/NAME/<variant>.npz and readings.json
    CORPUS/venv/bin/python -m benchmarks.package_decisions decide NAME DIR/NAME   # into the figures (OUT below)

Matching: a detection is kept when the other side has one of IoU >= 0.5 (greedy, best first); F1 over all rows.
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
IOU_MATCH = 0.5
PIXEL_TOLERANCES = (1.0, 2.0)  # landmark displacement thresholds reported (pixels of the model's crop)


def outputs(project: Path, name: str, out: Path) -> None:
    """Every variant built in `project` for model `name`, run on the export's scoring rows (their FP32 outputs
    beside): DIR/NAME/<variant>.npz each, and readings.json: each variant's outputs judged by this checkout's
    readings (pipeline.core.evaluate) under the project's constraints, and its verdict then."""
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
    deployed = json.loads((project / "reports" / "selection" / f"{name}.json").read_text()).get("chosen")
    verdicts = {"deployed": deployed, "variants": {}}
    for artifact in sorted((project / "artifacts" / name).iterdir()):
        if not artifact.is_dir() or artifact.name == "source" or build.load(artifact).status != "ok":
            continue
        loaded = load_variant(name, layout.variant_dir(name, artifact.name, project), project)
        rows = loaded.reference
        got = run_batched(loaded.session.run, rows.inputs, config.fixed_batch or 16, config.fixed_batch is not None)
        saved = {f"source:{k}": v for k, v in rows.outputs.items()} | {f"variant:{k}": got[k] for k in rows.outputs}
        np.savez(folder / f"{artifact.name}.npz", variant=artifact.name, names=np.array(list(rows.outputs)), **saved)
        fidelity = fidelity_block(rows.outputs, got, judging=Judging.of(config))
        broken = [v.message for v in quality_violations(Measured(fidelity=fidelity), constraints)]
        verdicts["variants"][artifact.name] = {
            "readings": {o: [f["output_kind"], f["kind_from"]] for o, f in fidelity.items()},
            "verdict": "; ".join(broken) or "meets the constraints",
            "rows": len(rows),
        }
        print(f"{name} {artifact.name}: {verdicts['variants'][artifact.name]['verdict']}")
    (folder / "readings.json").write_text(json.dumps(verdicts, indent=1) + "\n")


def matched_f1(reference: list[list[np.ndarray]], found: list[list[np.ndarray]]) -> dict[str, Any]:
    """Detections (boxes, per row) of the variant against the source's, greedy IoU matching."""
    from benchmarks.foreign_corpus.make_mediapipe import iou

    hits = want = got = rows_differ = 0
    for ref_boxes, out_boxes in zip(reference, found, strict=True):
        free = list(range(len(out_boxes)))
        for box in ref_boxes:
            best = max(free, key=lambda j: iou(box, out_boxes[j]), default=None)
            if best is not None and iou(box, out_boxes[best]) >= IOU_MATCH:
                hits += 1
                free.remove(best)
        want, got = want + len(ref_boxes), got + len(out_boxes)
        rows_differ += len(ref_boxes) != len(out_boxes)
    f1 = 2 * hits / (want + got) if want + got else None
    return {"detections_source": want, "detections_variant": got, "matched": hits, "detection_f1": f1,
            "rows_with_another_count": rows_differ}  # fmt: skip


def ssd_detections(module: Any, regressors: np.ndarray, logits: np.ndarray) -> list[list[np.ndarray]]:
    """A MediaPipe SSD detector's decode (the maker's copy of its graph's calculators), boxes per row."""
    centers = module.anchors()
    return [[d["box"] for d in module.decode(r, s, centers)] for r, s in zip(regressors, logits, strict=True)]


def points_moved(reference: np.ndarray, found: np.ndarray, rows: np.ndarray | None = None) -> dict[str, Any]:
    """Landmarks (x, y, z) in the crop's pixels: the largest (x, y) displacement and the rows (faces, hands) with
    a point moved farther than each of PIXEL_TOLERANCES; `rows`: the rows the package keeps (presence)."""
    ref = reference.reshape(len(reference), -1, 3)[..., :2]
    got = found.reshape(len(found), -1, 3)[..., :2]
    moved = np.linalg.norm(got - ref, axis=-1).max(axis=1)
    if rows is not None:
        moved = moved[rows]
    figures = {"rows": len(moved), "max_px": round(float(moved.max(initial=0.0)), 3)}
    for tolerance in PIXEL_TOLERANCES:
        figures[f"rows_over_{tolerance:g}px"] = int((moved > tolerance).sum())
    return figures


def decide_all(name: str, folder: Path) -> dict[str, Any]:
    """The package's decisions for every variant saved in `folder`, beside the pipeline's verdict on it."""
    verdicts = json.loads((folder / "readings.json").read_text())
    found = {"model": name, "deployed": verdicts["deployed"], "variants": {}}
    for saved in sorted(folder.glob("*.npz")):
        figures = decide(name, saved)
        found["variants"][saved.stem] = {k: v for k, v in figures.items() if k not in ("model", "variant")} | {
            "pipeline": verdicts["variants"][saved.stem]
        }
    return found


def decide(name: str, saved: Path) -> dict[str, Any]:
    """The package's decisions on the source's outputs and on the deployed variant's, compared."""
    with np.load(saved) as data:
        names = [str(n) for n in data["names"]]
        source = [data[f"source:{n}"] for n in names]
        variant = [data[f"variant:{n}"] for n in names]
        figures: dict[str, Any] = {"model": name, "variant": str(data["variant"]), "outputs": names}
    if name in ("mediapipe_face_detection", "mediapipe_palm_detection"):
        if name == "mediapipe_face_detection":
            from benchmarks.foreign_corpus import make_mediapipe as module
        else:
            from benchmarks.foreign_corpus import make_mediapipe_hands as module
        (regs, logits), (got_regs, got_logits) = (sorted(o, key=lambda a: -a.shape[-1]) for o in (source, variant))
        figures |= matched_f1(ssd_detections(module, regs, logits), ssd_detections(module, got_regs, got_logits))
    elif name == "mediapipe_face_landmark":
        (mesh, presence), (got_mesh, got_presence) = (sorted(o, key=lambda a: -a.size) for o in (source, variant))
        present, got_present = presence.reshape(-1) > 0, got_presence.reshape(-1) > 0  # sigmoid >= 0.5
        figures |= {"presence_flips": int((present != got_present).sum())} | points_moved(mesh, got_mesh, present)
    elif name == "mediapipe_hand_landmark":  # Identity: pixels, _1: presence, _2: handedness, _3: world (metres)
        mesh, presence, handedness, world = source
        got_mesh, got_presence, got_handedness, got_world = variant
        present = presence.reshape(-1) > 0.5
        left, got_left = handedness.reshape(-1) >= 0.5, got_handedness.reshape(-1) >= 0.5
        figures |= {
            "presence_flips": int((present != (got_presence.reshape(-1) > 0.5)).sum()),
            "handedness_flips": int((left != got_left)[present].sum()),
            "world_max_cm": round(100 * float(np.abs(world - got_world)[present].max(initial=0.0)), 3),
        } | points_moved(mesh, got_mesh, present)  # fmt: skip
    elif name == "ddddocr_det":
        figures |= matched_f1(ddddocr_boxes(source[0]), ddddocr_boxes(variant[0]))
    elif name == "ddddocr_ocr":
        ref, got = ddddocr_strings(source[0]), ddddocr_strings(variant[0])
        figures |= {"strings": len(ref), "strings_changed": sum(a != b for a, b in zip(ref, got, strict=True)),
                    "examples": [(a, b) for a, b in zip(ref, got, strict=True) if a != b][:5]}  # fmt: skip
    else:
        raise SystemExit(f"{name}: no package post-processing here")
    return figures


def ddddocr_boxes(grids: np.ndarray) -> list[list[np.ndarray]]:
    """ddddocr's own detection post-processing (its engine's demo_postprocess and multiclass_nms, at the
    thresholds DdddOcr.detection uses), boxes per row in the 416 input's pixels."""
    from ddddocr import DdddOcr

    from benchmarks.foreign_corpus.make_ddddocr import DET_SIZE, NMS_IOU, SCORE

    engine = DdddOcr(ocr=False, det=True, show_ad=False).detection_engine
    found = []
    for grid in grids:
        pred = engine.demo_postprocess(grid[None].copy(), (DET_SIZE, DET_SIZE))[0]
        xyxy = np.stack([pred[:, 0] - pred[:, 2] / 2, pred[:, 1] - pred[:, 3] / 2,
                         pred[:, 0] + pred[:, 2] / 2, pred[:, 1] + pred[:, 3] / 2], 1)  # fmt: skip
        kept = engine.multiclass_nms(xyxy, pred[:, 4:5] * pred[:, 5:], nms_thr=NMS_IOU, score_thr=SCORE)
        found.append([] if kept is None else [row[:4] for row in kept])
    return found


def ddddocr_strings(logits: np.ndarray) -> list[str]:
    """ddddocr's own text decode (its OCR engine's _process_text_output: argmax per position, repeats and the
    blank dropped, its beta charset) on each row; `logits` rows first [rows, T, classes], as the pipeline returns
    the time-major output, handed back time-major [T, 1, classes] as the session gives it to the package."""
    from ddddocr import DdddOcr

    engine = DdddOcr(beta=True, show_ad=False).ocr_engine
    return [engine._process_text_output(row[:, None, :]) for row in logits.reshape(-1, *logits.shape[-2:])]


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
    pipeline = {"readings": {"mesh": ["points", "smoke"]}, "verdict": "smoke", "rows": 4}
    (folder / "readings.json").write_text(json.dumps({"deployed": "smoke", "variants": {"smoke": pipeline}}))
    figures = decide_all("mediapipe_face_landmark", folder)
    smoked = figures["variants"]["smoke"]
    assert smoked["rows_over_2px"] == 1 and smoked["max_px"] == 3.0, figures
    record(figures, out)


def record(figures: dict[str, Any], out: Path) -> None:
    """Into `out` (JSON by model), beside the models decided before; printed."""
    found = json.loads(out.read_text()) if out.exists() else {}
    found[figures["model"]] = figures
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(found, indent=1, default=str) + "\n")
    print(json.dumps(figures, default=str))


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
    args = parser.parse_args(argv)
    if args.smoke:
        return smoke(args.out or Path(tempfile.mkdtemp()) / "smoke.json")
    if args.command == "outputs":
        outputs(args.project, args.name, args.saved_to)
    elif args.command == "decide":
        record(decide_all(args.name, args.saved), args.out or OUT)
    else:
        parser.error("a command: outputs or decide (or --smoke)")


if __name__ == "__main__":
    main()
