"""nudenet_yolov8/: the Ultralytics YOLOv8n detector nudenet ships (torch.onnx export, dynamic batch and size),
fed 24 real photos and scans that ship inside the scikit-image and scikit-learn wheels, preprocessed by
nudenet's own _read_image.

    python -m benchmarks.foreign_corpus.make_nudenet OUT
"""

from __future__ import annotations

import sys
from pathlib import Path

import cv2
import numpy as np
from nudenet.nudenet import NudeDetector, _read_image

from benchmarks.foreign_corpus._common import copy_from_wheel, pinned, save_eval, wheel_file, write_readme

DIST, MODEL = "nudenet", "nudenet/320n.onnx"
SKIMAGE = ["astronaut.png", "camera.png", "chelsea.png", "coffee.png", "rocket.jpg", "motorcycle_left.png",
           "motorcycle_right.png", "hubble_deep_field.jpg", "retina.jpg", "coins.png", "moon.png", "page.png",
           "text.png", "gravel.png", "brick.png", "grass.png", "horse.png", "logo.png", "color.png", "clock_motion.png",
           "ihc.png", "cell.png"]  # fmt: skip
SKLEARN = ["china.jpg", "flower.jpg"]
SIZE = 320  # the package's default inference_resolution and the export's imgsz


def main(out: Path) -> None:
    paths = [wheel_file("scikit-image", f"skimage/data/{n}") for n in SKIMAGE]
    paths += [wheel_file("scikit-learn", f"sklearn/datasets/images/{n}") for n in SKLEARN]
    # nudenet's own preprocessing: cv2.imread BGR, pad right/bottom to a black square, blobFromImage 1/255, 320x320, RGB
    images = np.stack([_read_image(str(p), SIZE)[0][0] for p in paths]).astype(np.float32)
    detector = NudeDetector()
    found = {p.name: [(d["class"], round(d["score"], 2)) for d in detector.detect(str(p))] for p in paths}
    sizes = [(p.name, cv2.imread(str(p)).shape[:2]) for p in paths]

    dst = out / "nudenet_yolov8"
    model_file = copy_from_wheel(DIST, MODEL, dst)
    save_eval(dst, {"images": images}, compressed=True)

    def extra(outs: list[np.ndarray]) -> list[str]:
        box, cls = outs[0][:, :4], outs[0][:, 4:]
        return [
            f"channels 0-3 (cx,cy,w,h in input pixels): min={box.min():.4g} max={box.max():.4g} mean={box.mean():.4g}",
            f"channels 4-21 (18 per-class sigmoid scores, no objectness): min={cls.min():.4g} max={cls.max():.4g} "
            f"mean={cls.mean():.4g}; anchors with max score>=0.25: {(cls.max(1) >= 0.25).sum()} of "
            f"{cls.shape[0] * cls.shape[2]}",
            "anchors = 40*40+20*20+10*10 = 2100 for 320x320 (strides 8/16/32)",
        ]

    how = f"""{len(paths)} real images shipped inside PyPI wheels: {pinned("scikit-image")} (skimage/data/*:
{", ".join(SKIMAGE)}) and {pinned("scikit-learn")} (sklearn/datasets/images/{", ".join(SKLEARN)}).
Each went through nudenet's OWN preprocessing
nudenet.nudenet._read_image(path, {SIZE}): cv2.imread (BGR, 3ch), pad right/bottom with black to a square of the longer
side, cv2.dnn.blobFromImage(scale 1/255, size {SIZE}x{SIZE}, mean 0, swapRB=True -> RGB, crop=False) ->
[1,3,{SIZE},{SIZE}]; rows stacked on axis 0 -> [{len(paths)},3,{SIZE},{SIZE}] float32 in [0,1].
Saved with np.savez_compressed.
({SIZE} is the package default inference_resolution and the export imgsz.)
Original sizes (H,W): {sizes}
Package's own NudeDetector().detect() result per image (post-NMS) for reference: {found}"""
    notes = """- Ultralytics 8.2.46 YOLOv8n detection export (metadata_props: author=Ultralytics, task=detect,
  imgsz=[320,320], batch=1, stride=32, 18 names), producer pytorch 2.3.1, opset 17; weights in initializers (no
  Constant nodes).
- Input 'images' ['batch', 3, 'height', 'width'] - dynamic batch AND spatial dims (exported with dynamic=True).
- Output 'output0' ['batch', 22, <anchor-count expression>] - the anchor axis is LAST (channels-first, [B, 4+18, A]);
  its dim_param is a long sympy expression string: '(floor(floor(floor(height/2 - 1/2)/2)/2) + 1)*(...) + ...'
  verbatim in the graph-facts section.
- No objectness channel: 4 box channels (cx,cy,w,h, absolute input pixels) + 18 class Sigmoid scores.
- The single Softmax node is the DFL (distribution focal loss) box decoding over 16 bins, not a class softmax;
  class scores are Sigmoid.
- Metadata says batch=1 but the graph batch is symbolic; batch 24 runs fine."""
    note = (
        "Ultralytics YOLOv8n via torch.onnx: dynamic batch/H/W, anchors last [N,22,A] behind a sympy-expression dim "
        "name, box pixel coordinates mixed with sigmoid class scores in one output"
    )
    write_readme(dst, model_file, (DIST, MODEL), how, notes, note, extra)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
