"""magika/: magika's file-type classifier (JAX -> jax2tf -> tf2onnx) fed real files, featurised by magika's own
code so each row is exactly what the package would hand the model.

Files: a fixed list of Debian 12 system files of many types plus a JPEG from the scikit-learn wheel. Should some
system file be missing on another machine, files shipped in the venv's wheels stand in for it (and the README
lists what was used).

    python -m benchmarks.foreign_corpus.make_magika OUT
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from magika import Magika

from benchmarks.foreign_corpus._common import copy_from_wheel, save_eval, wheel_file, write_readme

DIST, MODEL = "magika", "magika/models/standard_v3_3/model.onnx"
ROWS = 32
SYSTEM_FILES = [
    "/usr/lib/python3.11/pkgutil.py",
    "/usr/lib/python3.11/py_compile.py",
    "/usr/lib/python3.11/_py_abc.py",
    "/usr/lib/python3.11/distutils/command/__pycache__/clean.cpython-311.pyc",
    "/usr/share/doc/libxcursor1/copyright",
    "/usr/share/doc/libx11-data/copyright",
    "/usr/share/doc/libsemanage-common/changelog.Debian.gz",
    "/usr/share/doc/liblcms2-2/changelog.Debian.gz",
    "/etc/libaudit.conf",
    "/etc/e2scrub.conf",
    "/usr/share/icons/Adwaita/96x96/status/network-cellular-signal-ok-symbolic.symbolic.png",
    "/usr/share/icons/Adwaita/24x24/status/weather-severe-alert-symbolic.symbolic.png",
    "/usr/share/icons/Adwaita/scalable/status/network-cellular-signal-excellent-symbolic-rtl.svg",
    "/usr/share/mime/application/vnd.android.package-archive.xml",
    "/usr/share/mime/application/x-cbt.xml",
    "/usr/share/doc/libffi8/html/Thread-Safety.html",
    "/usr/share/doc/libffi-dev/html/Structures.html",
    "/usr/share/locale/sl/LC_MESSAGES/libapt-pkg6.0.mo",
    "/usr/share/perl/5.36.0/version.pm",
    "/usr/share/cmake-3.25/Templates/MSBuild/FlagTables/v143_Link.json",
    "/usr/share/doc/valgrind/html/vg_basic.css",
    "/usr/share/fonts/truetype/dejavu/DejaVuSansCondensed.ttf",
    "/usr/share/ca-certificates/mozilla/Certainly_Root_R1.crt",
    "/usr/include/cursesw.h",
    "/usr/lib/x86_64-linux-gnu/libzstd.so.1.5.4",
    "/usr/bin/espeak-ng",
    "/var/cache/apt/archives/libsox-fmt-alsa_14.4.2+git20190427-3.5_amd64.deb",
    "/usr/share/javascript/sphinxdoc/1.0/sphinx_highlight.js",
    "/etc/init.d/dbus",
    "/usr/share/doc/nodejs/api/util.md",
    "/usr/share/cmake-3.25/Help/prop_tgt/VS_DOTNET_REFERENCEPROP_refname_TAG_tagname.rst",
]
WHEEL_FILES = [("scikit-learn", "sklearn/datasets/images/china.jpg")]
STAND_INS = [  # used in order, only for missing system files
    ("scikit-learn", "sklearn/datasets/images/flower.jpg"),
    ("scikit-image", "skimage/data/text.png"),
    ("rapidocr-onnxruntime", "rapidocr_onnxruntime/config.yaml"),
    ("magika", "magika/models/standard_v3_3/config.min.json"),
    ("nudenet", "nudenet/nudenet.py"),
    ("silero-vad", "silero_vad/data/silero_vad.jit"),
]


def files() -> list[Path]:
    found = [Path(p) for p in SYSTEM_FILES if Path(p).is_file()]
    missing = len(SYSTEM_FILES) - len(found)
    if missing:
        print(f"{missing} system files missing, standing in: {STAND_INS[:missing]}")
    return found + [wheel_file(*f) for f in WHEEL_FILES + STAND_INS[:missing]]


def main(out: Path) -> None:
    magika = Magika()
    rows, used = [], []
    for path in files():
        # magika's own features (standard_v3_3: first 1024 bytes after lstrip, last 1024 before rstrip, pad 256);
        # None for files its rules settle without the model
        _, features = magika._get_result_or_features_from_path(path)
        if features is not None:
            rows.append(features.beg[:1024] + features.end[-1024:])
            used.append(path)
    rows, used = rows[:ROWS], used[:ROWS]
    labels = {str(r.path): (r.prediction.dl.label, round(r.prediction.score, 3)) for r in magika.identify_paths(used)}

    dst = out / "magika"
    model_file = copy_from_wheel(DIST, MODEL, dst)
    config = copy_from_wheel(DIST, str(Path(MODEL).with_name("config.min.json")), dst)
    save_eval(dst, {"bytes": np.array(rows, dtype=np.int32)})
    target_labels = json.loads((dst / config).read_text())["target_labels_space"]

    def extra(outs: list[np.ndarray]) -> list[str]:
        sums = outs[0].sum(1)
        return [
            f"row sums of 'target_label' (softmax check): min={sums.min():.6f} max={sums.max():.6f}",
            "argmax labels: " + ", ".join(target_labels[i] for i in outs[0].argmax(1)),
        ]

    listing = "\n".join(
        f"  row {i:2d}: {p}  size={p.stat().st_size}  magika dl label={labels[str(p)][0]} score={labels[str(p)][1]}"
        for i, p in enumerate(used)
    )
    how = f"""{len(used)} real files: Debian 12 system files of many types and a JPEG from the scikit-learn wheel (a
fixed list), featurised with magika's OWN code: Magika()._get_result_or_features_from_path(path) (model standard_v3_3,
config beg_size=1024 end_size=1024 mid_size=0 block_size=4096 padding_token=256): read <=4096 bytes from start and end,
lstrip()/rstrip() whitespace, take first 1024 / last 1024 bytes, pad with 256 (beg: pad at end; end: pad at start);
row = beg + end, exactly as Magika._get_raw_predictions builds it -> int32 [N,2048]. Values are 0..255 byte values,
256 = padding. Files (files too small for the DL path would be skipped by magika's own rule):
{listing}"""
    notes = """- producer tf2onnx 1.16.1; node names 'jax2tf_get_logits_/pjit_get_logits_/MagikaV2/...' show the chain
  JAX/Flax -> jax2tf -> TF -> tf2onnx. Opset ai.onnx 15 + ai.onnx.ml 2 imported (no ai.onnx.ml op actually used).
- Input 'bytes' is INT32 (not float): token ids 0..256 (256=padding). One-hot is built with Equal/Cast (no Gather
  embedding); then Dense (MatMul 'einsum'), Conv, GlobalMaxPool, Dense.
- LayerNorm is also decomposed (ReduceSum/Sub/Mul/Sqrt/Reciprocal), 2 Tanh nodes (consistent with tanh-approximated
  GELU in the 2 Dense blocks).
- Batch axis symbolic name is tf2onnx's 'unk__214' (output 'unk__215').
- Softmax is DECOMPOSED: no Softmax node; Exp + ReduceSum + Div (with a Max-subtraction) at the end. Output
  'target_label' rows sum to 1.
- Weights are initializers (36), no Constant nodes. Config file config.min.json copied alongside (labels list)."""
    note = (
        "JAX->jax2tf->tf2onnx: int32 byte-token input behind batch axis 'unk__214', one-hot via Equal, decomposed "
        "LayerNorm and softmax (Exp/ReduceSum/Div)"
    )
    write_readme(dst, model_file, (DIST, MODEL), how, notes, note, extra)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
