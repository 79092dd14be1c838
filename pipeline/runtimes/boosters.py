"""Gradient-boosted trees run by their own library, the baseline of a tree source: XGBoost's `inplace_predict`
(no DMatrix built per call: its fastest path for dense rows) and LightGBM's `Booster.predict`, each held to
`threads` as the other runtimes are. The file is the library's own (XGBoost JSON, UBJSON or its legacy binary;
LightGBM's text model): what its users load and call today.

Every tree runtime (this one, pipeline.runtimes.tl2cgen_rt, ONNX Runtime on the ONNX-ML export) answers alike
(`shaped`): a binary classifier's probability of the positive class as two columns [1 - p, p] (what
predict_proba and the ONNX-ML converters give), a multi-class one's rows as they are, anything else one
column per row. The booster is stateless at predict time: concurrent requests share it."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from pipeline.core.data import Arrays
from pipeline.core.records.build import RuntimeConfig
from pipeline.runtimes.base import Session

Answer = Literal["binary", "classes", "values"]  # how a library's raw predictions read (shaped)
PROBABILITIES, PREDICTION = "probabilities", "prediction"  # the output's name, as the ONNX-ML export keeps it


def shaped(raw: np.ndarray, answer: Answer) -> np.ndarray:
    """The library's predictions as every tree runtime gives them: float32, one row per input row, a binary
    classifier's P(1) as [1 - p, p]."""
    rows = np.asarray(raw, dtype=np.float32)
    rows = rows.reshape(len(rows), -1)
    return np.hstack([1 - rows[:, :1], rows[:, :1]]) if answer == "binary" else rows


def output_name(answer: Answer) -> str:
    return PROBABILITIES if answer != "values" else PREDICTION


@dataclass(frozen=True)
class Ensemble:
    """A tree ensemble file as its library loaded it, with what the file says of itself."""

    library: Literal["xgboost", "lightgbm"]
    booster: Any
    objective: str
    classes: int  # the class columns of a multi-class model; 1 otherwise
    features: int
    feature_names: list[str]
    version: str  # the library's

    @property
    def answer(self) -> Answer:
        if self.objective in ("binary:logistic", "binary"):
            return "binary"
        if self.objective in ("multi:softprob", "multiclass", "softmax", "multiclassova", "ova"):
            return "classes"
        return "values"

    @property
    def ranks(self) -> bool:
        """A learning-to-rank objective (XGBoost's rank:*, LightGBM's lambdarank, rank_xendcg): its score per row
        is read by the order it puts rows in."""
        return self.objective.startswith("rank") or self.objective == "lambdarank"

    def predictor(self, threads: int) -> Callable[[np.ndarray], np.ndarray]:
        """The library's fastest call for dense rows, at `threads`."""
        booster = self.booster
        if self.library == "xgboost":
            booster.set_param({"nthread": threads})
            return lambda x: booster.inplace_predict(x, validate_features=False)
        return lambda x: booster.predict(x, num_threads=threads)

    def predict(self, x: np.ndarray, threads: int = 1) -> np.ndarray:
        return shaped(self.predictor(threads)(x), self.answer)


def is_lightgbm_text(path: Path) -> bool:
    """LightGBM's text model starts with the line `tree`."""
    with open(path, "rb") as file:
        return file.read(5).rstrip() == b"tree"


def lightgbm_header(path: Path) -> dict[str, str]:
    """The key=value lines before a LightGBM text model's first tree (objective, num_class, feature_names)."""
    found = {}
    with open(path, encoding="utf-8", errors="replace") as file:
        for line in file:
            if line.startswith("Tree="):
                break
            key, equals, value = line.rstrip("\n").partition("=")
            if equals:
                found[key] = value
    return found


def open_ensemble(path: Path) -> Ensemble:
    """The ensemble in `path` (LightGBM's text model, else XGBoost's any format); the library's error when it
    is neither."""
    if is_lightgbm_text(path):
        import lightgbm

        booster = lightgbm.Booster(model_file=str(path))
        header = lightgbm_header(path)  # its parameters section, which Booster.params reads, is optional (v2 has none)
        classes = int(header.get("num_class", 1))
        objective = header.get("objective", "").split(" ")[0]
        names = booster.feature_name()
        return Ensemble("lightgbm", booster, objective, classes, booster.num_feature(), names, lightgbm.__version__)
    import xgboost

    booster = xgboost.Booster(model_file=str(path))
    learner = json.loads(booster.save_config())["learner"]
    classes = max(int(learner["learner_model_param"].get("num_class", "0")), 1)
    names = list(booster.feature_names or [])
    return Ensemble("xgboost", booster, learner["objective"]["name"], classes, booster.num_features(), names,
                    xgboost.__version__)  # fmt: skip


class BoosterSession(Session):
    def __init__(self, path: Path, threads: int, config: RuntimeConfig) -> None:
        self._ensemble = open_ensemble(path)
        self._threads = threads
        self._call = self._ensemble.predictor(threads)
        self.input_names = config.input_names or ["X"]
        self.output_names = config.output_names or [output_name(self._ensemble.answer)]

    def run(self, inputs: Arrays) -> Arrays:
        return {self.output_names[0]: shaped(self._call(inputs[self.input_names[0]]), self._ensemble.answer)}

    def prepare(self, inputs: Arrays) -> Callable[[], Any]:
        call, answer, x = self._call, self._ensemble.answer, np.ascontiguousarray(inputs[self.input_names[0]])
        return lambda: shaped(call(x), answer)

    def details(self) -> dict[str, Any]:
        ensemble = self._ensemble
        how = "inplace_predict" if ensemble.library == "xgboost" else "Booster.predict"
        return {"threads": self._threads, "library": f"{ensemble.library} {ensemble.version}", "mode": how}


def load(artifact: Path, threads: int, config: RuntimeConfig, target: str = "cpu") -> BoosterSession:
    return BoosterSession(artifact, threads, config)
