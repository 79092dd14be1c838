"""ppocr_det/, ppocr_rec/, ppocr_cls/: the three PaddleOCR models rapidocr-onnxruntime ships (paddle2onnx
exports of two generations), fed the exact tensors the package's own OCR pipeline hands them.

Pages: 8 documents rendered from fixed seeds with Debian's DejaVu fonts and the license texts in
/usr/share/common-licenses; each goes through RapidOCR()(page) with the onnxruntime sessions wrapped so every
tensor they receive is recorded. Det gets the 8 page tensors, cls the first 24 line crops it was given, rec 24
line crops re-run as one batch of the package's recogniser.

    python -m benchmarks.foreign_corpus.make_ocr OUT
"""

from __future__ import annotations

import random
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from PIL import Image, ImageDraw, ImageFont
from rapidocr_onnxruntime import RapidOCR

from benchmarks.foreign_corpus._common import copy_from_wheel, save_eval, write_readme

DIST = "rapidocr-onnxruntime"
TEXTS = [f"/usr/share/common-licenses/{n}" for n in ("Apache-2.0", "GPL-3", "BSD", "Artistic")]
FONT_DIR = "/usr/share/fonts/truetype/dejavu/"
FONTS = ["DejaVuSans.ttf", "DejaVuSerif.ttf", "DejaVuSansMono.ttf", "DejaVuSans-Bold.ttf", "DejaVuSerif-Bold.ttf",
         "DejaVuSansCondensed.ttf"]  # fmt: skip
PAGES, SIZE, ROWS = 8, 736, 24
METRICS = Path(__file__).with_name("metrics")  # users' metric files, copied beside their model


def render_pages(folder: Path) -> list[Path]:
    """Dark lines of consecutive license-text words in random fonts, sizes and spacing on a light page; beside
    each page (doc{k}_text.png) the boxes of its text lines, the detector's ground truth (text_mask)."""
    folder.mkdir(parents=True, exist_ok=True)
    words: list[str] = []
    for text in TEXTS:
        words += re.sub(r"\s+", " ", Path(text).read_text(errors="ignore")).split(" ")
    rnd = random.Random(1)
    paths = []
    for k in range(PAGES):
        bg = tuple(rnd.randint(225, 255) for _ in range(3))
        fg = tuple(rnd.randint(0, 70) for _ in range(3))
        im = Image.new("RGB", (SIZE, SIZE), bg)
        draw = ImageDraw.Draw(im)
        mask = Image.new("L", (SIZE, SIZE), 0)
        boxes = ImageDraw.Draw(mask)
        y = rnd.randint(15, 40)
        wi = rnd.randint(0, len(words) - 400)
        while y < SIZE - 60:
            size = rnd.choice([18, 20, 22, 24, 28, 32])
            font = ImageFont.truetype(FONT_DIR + rnd.choice(FONTS), size)
            x = rnd.randint(20, 60)
            max_width = rnd.randint(250, SIZE - x - 20)
            line: list[str] = []
            while draw.textlength(" ".join([*line, words[wi]]), font=font) <= max_width:
                line.append(words[wi])
                wi += 1
            if not line:
                wi += 1
                continue
            draw.text((x, y), " ".join(line), font=font, fill=fg)
            boxes.rectangle(draw.textbbox((x, y), " ".join(line), font=font), fill=255)
            y += int(size * rnd.uniform(1.6, 2.4))
        paths.append(folder / f"doc{k}.png")
        im.save(paths[-1])
        mask.save(folder / f"doc{k}_text.png")
    return paths


class Spy:
    """Stands in for `target`: records each call's first argument with `keep`, then calls through."""

    def __init__(self, target: Any, keep: Callable[[Any], None]) -> None:
        self.target, self.keep = target, keep

    def __call__(self, x: Any, *args: Any, **kwargs: Any) -> Any:
        self.keep(x)
        return self.target(x, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.target, name)


def capture(pages: list[Path]) -> dict[str, Any]:
    ocr = RapidOCR()
    det_in: list[np.ndarray] = []
    cls_in: list[np.ndarray] = []
    rec_in: list[np.ndarray] = []
    crops: list[np.ndarray] = []
    ocr.text_det.infer = Spy(ocr.text_det.infer, lambda x: det_in.append(x.copy()))
    ocr.text_cls.infer = Spy(ocr.text_cls.infer, lambda x: cls_in.append(x.copy()))
    recogniser = ocr.text_rec
    recogniser.session = Spy(recogniser.session, lambda x: rec_in.append(x.copy()))
    ocr.text_rec = Spy(recogniser, crops.extend)  # the post-det, post-cls line crops
    lines = [[r[1] for r in (ocr(str(p))[0] or [])] for p in pages]

    # rec: 24 crops with width/height <= 12, evenly spread, through the recogniser once as one batch
    ok = [i for i, c in enumerate(crops) if c.shape[1] / c.shape[0] <= 12.0]
    chosen = [crops[ok[i]] for i in np.linspace(0, len(ok) - 1, ROWS).round().astype(int)]
    rec_in.clear()
    recogniser.rec_batch_num = ROWS
    decoded, _ = recogniser(chosen)
    assert len(rec_in) == 1, len(rec_in)
    order = np.argsort([c.shape[1] / float(c.shape[0]) for c in chosen])  # the recogniser's batch (width) order
    return {
        "det": np.concatenate(det_in, 0).astype(np.float32),
        "cls": np.concatenate(cls_in, 0)[:ROWS].astype(np.float32),
        "rec": rec_in[0].astype(np.float32),
        "lines": lines,
        "crops": len(crops),
        "rec_texts": [decoded[j][0] for j in order],
    }


def main(out: Path) -> None:
    pages = render_pages(out / "sources" / "ocr_images")
    text_mask = np.stack([np.asarray(Image.open(p.with_name(f"{p.stem}_text.png"))) > 127 for p in pages])[:, None]
    got = capture(pages)
    det, cls, rec = got["det"], got["cls"], got["rec"]
    assert det.shape == (PAGES, 3, SIZE, SIZE), det.shape
    common = f"""{PAGES} synthetic document pages {SIZE}x{SIZE} RGB (PNG kept in ../sources/ocr_images/), rendered with
PIL {Image.__version__} using DejaVu TrueType fonts (Sans/Serif/Mono/Bold/Condensed, 18-32 px) on random light
backgrounds (random.Random(1)), dark ink; text = consecutive words of real license texts in
/usr/share/common-licenses (Apache-2.0, GPL-3, BSD, Artistic). Each page was run through the package's own
end-to-end pipeline RapidOCR()(path) (default config.yaml), and the exact tensors it handed to each onnxruntime
session were captured by wrapping the session objects (opencv-python-headless {cv2.__version__} used for cv2 calls)."""
    p2o = """- producer_name EMPTY, producer_version EMPTY (paddle2onnx output; axis names 'p2o.DynamicDimension.N' are
  paddle2onnx's).
- ALL weights are Constant nodes (0 initializers).
"""
    models = [
        (
            "ppocr_det",
            "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
            det,
            common
            + f"""
Det preprocessing (ch_ppocr_det/utils.py DetPreProcess, limit_type=min, limit_side_len=736): resize so min side >= 736
(already 736 here: ratio 1.0), round H,W to multiples of 32, BGR channel order as loaded by cv2, x/255, (x-0.5)/0.5,
HWC->CHW, batch 1. The {PAGES} per-page [1,3,{SIZE},{SIZE}] tensors were concatenated on axis 0 ->
[{PAGES},3,{SIZE},{SIZE}]. Saved with np.savez_compressed.
OCR texts recognised per page (end-to-end, for reference): {[len(t) for t in got["lines"]]} lines; page 0 first lines:
{got["lines"][0][:3]}
Labels: `text_mask` [{PAGES},1,{SIZE},{SIZE}] bool, the box (PIL textbbox) of every text line drawn, in the page's own
pixels (the det input is the page at ratio 1.0): {text_mask.mean():.4f} of the pixels. metric.py (text_f1) is the
user's metric on it: pixel F1 of the map at RapidOCR's thresh 0.3.""",
            p2o
            + """- Input 'x' [N,3,H,W] with H,W symbolic ('p2o.DynamicDimension.1/2'); the network needs H,W multiples
  of 32.
- Output 'sigmoid_0.tmp_0' [N,1,H,W] probability map (Sigmoid at the end; no softmax). Output dims named
  p2o.DynamicDimension.3..5 (not tied to the input names).""",
            "paddle2onnx: all weights in Constant nodes, empty producer, axes named 'p2o.DynamicDimension.N'; "
            "H,W must be multiples of 32",
            lambda o: [f"prob map fraction >0.3 (text pixels): {(o[0] > 0.3).mean():.4f}"],
        ),
        (
            "ppocr_rec",
            "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
            rec,
            common
            + f"""
Rec input: the post-det, post-cls text-line crops (get_rotate_crop_image) that the pipeline handed to TextRecognizer;
{got["crops"]} crops in total, of which {ROWS} with width/height <= 12 were taken evenly spaced, and passed in ONE call
of the package's TextRecognizer with rec_batch_num={ROWS}, i.e. its own resize_norm_img: imgH=48,
imgW=int(48*max_wh_ratio over the batch) = {rec.shape[3]}, keep aspect (ceil(48*w/h)), cv2.resize, x/255, (x-0.5)/0.5,
right-pad with 0. Rows are in the package's width-sorted order.
Decoded texts from that call (package CTC post-process), listed in TENSOR ROW order: {got["rec_texts"]}""",
            p2o
            + """- Input 'x' declared ['p2o.DynamicDimension.0', 3, '?', 'p2o.DynamicDimension.1']: the HEIGHT axis is
  named literally '?' (must be 48 in practice).
- Output 'softmax_11.tmp_0' [N, T, 6625] = per-timestep class probabilities (T = W/8); Softmax NODE at the end
  (3 Softmax nodes in total, 2 inside attention).
- Dictionary (6623 chars + blank + space) stored in metadata_props key 'character'.""",
            "paddle2onnx: Constant-node weights, height axis named literally '?', per-timestep softmax over 6625 "
            "classes",
            lambda o: [
                f"sum over classes per timestep: min={o[0].sum(-1).min():.5f} max={o[0].sum(-1).max():.5f}; "
                f"T={o[0].shape[1]} for W={rec.shape[3]}"
            ],
        ),
        (
            "ppocr_cls",
            "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
            cls,
            common
            + f"""
Cls input: the first {ROWS} rows of the batches the pipeline itself fed to the text-direction classifier
(cls_image_shape [3,48,192], cls_batch_num=6; its resize_norm_img: keep aspect, height 48, width ceil(48*w/h) capped
at 192, x/255, (x-0.5)/0.5, right-pad 0).""",
            """- producer_name 'PaddlePaddle' (older paddle2onnx), producer_version empty, ir_version 7, opset 11.
- Input 'x' declared [-1, 3, '?', '?']: batch is dim_value = -1 (a NEGATIVE fixed value, not a dim_param); H and W
  named literally '?'.
- Output 'save_infer_model/scale_0.tmp_1' [-1, 2] (labels '0','180'); Softmax NODE at the end.
- ALL weights are Constant nodes (0 initializers).""",
            "old paddle2onnx: batch declared as dim_value -1 (negative, not a name), H/W named '?', Constant-node "
            "weights, 2-class Softmax",
            lambda o: [
                f"row sums: {o[0].sum(1).min():.5f}..{o[0].sum(1).max():.5f}; "
                f"argmax counts {np.bincount(o[0].argmax(1), minlength=2).tolist()}"
            ],
        ),
    ]
    user_metric = {
        "ppocr_det": ("ppocr_det.py", ["--metric", "metric.py:text_f1", "--threshold", "sigmoid_0.tmp_0=0.3"]),
        "ppocr_rec": (None, ["--judged-as", "softmax_11.tmp_0=ctc"]),  # what add names for a CTC recogniser
    }
    for folder, relpath, x, how, notes, note, extra in models:
        dst = out / folder
        model_file = copy_from_wheel(DIST, relpath, dst)
        labels = {"text_mask": text_mask} if folder == "ppocr_det" else {}
        save_eval(dst, {"x": x, **labels}, compressed=folder == "ppocr_det")
        metric, add_flags = user_metric.get(folder, (None, None))
        if metric:
            shutil.copy(METRICS / metric, dst / "metric.py")
        write_readme(dst, model_file, (DIST, relpath), how, notes, note, extra, add_flags=add_flags)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
