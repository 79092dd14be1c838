"""Gradient-boosted trees run by their own library, the baseline of a tree source: XGBoost's `inplace_predict`
(no DMatrix built per call: its fastest path for dense rows), LightGBM's `Booster.predict` and CatBoost's
`predict`, each held to `threads` as the other runtimes are. The file is the library's own (XGBoost JSON, UBJSON or
its legacy binary; LightGBM's text model; CatBoost's .cbm): what its users load and call today. One `Library` per
library says how its file and booster read.

Every tree runtime (this one, pipeline.runtimes.tl2cgen_rt, ONNX Runtime on the ONNX-ML export) answers alike
(`shaped`): a binary classifier's probability of the positive class as two columns [1 - p, p] (what
predict_proba and the ONNX-ML converters give), a multi-class one's rows as they are, anything else one
column per row. The booster is stateless at predict time: concurrent requests share it."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np

from pipeline.core.data import Arrays
from pipeline.runtimes import base
from pipeline.runtimes.base import Session

Answer = Literal["binary", "classes", "values"]  # how a library's raw predictions read (shaped)
PROBABILITIES, PREDICTION = "probabilities", "prediction"  # the output's name, as the ONNX-ML export keeps it


class Config(base.Config):
    """What tree libraries' adapter reads of its build's runtime_config (beside layout and code_root)."""

    input_names: list[str] | None = None  # its one input's name (a booster names none)
    output_names: list[str] | None = None


class CompiledConfig(Config):
    """What the adapters of trees compiled to code (tl2cgen_rt, lleaves_rt) read: how their predictions read too
    (a library's own file says so itself)."""

    answer: Answer | None = None


class Details(base.Details):
    """What the tree runtimes' sessions report (Session.details); None in a record written before the key was."""

    threads: int | None = None
    library: str | None = None  # what ran it, with its version ('xgboost 3.2.0', 'tl2cgen 1.0.0', 'lleaves ...')
    mode: str | None = None  # the call


def shaped(raw: np.ndarray, answer: Answer) -> np.ndarray:
    """The library's predictions as every tree runtime gives them: float32, one row per input row, a binary
    classifier's P(1) as [1 - p, p]."""
    rows = np.asarray(raw, dtype=np.float32)
    rows = rows.reshape(len(rows), -1)
    return np.hstack([1 - rows[:, :1], rows[:, :1]]) if answer == "binary" else rows


def output_name(answer: Answer) -> str:
    return PROBABILITIES if answer != "values" else PREDICTION


class Library:
    """What one tree library's own file and booster give: how its file is told by its first bytes, loaded and read
    (objective, classes, features), called at a thread count, and where its numerical splits are. One subclass per
    library; `LIBRARIES` holds them by the source kind's name."""

    name: ClassVar[str]
    binary: ClassVar[tuple[str, ...]]  # objectives whose raw prediction is P(class 1)
    multiclass: ClassVar[tuple[str, ...]]  # objectives whose prediction is a row of class probabilities
    suffix: ClassVar[str]  # of the file an estimator's booster is saved to
    call: ClassVar[str]  # the predict call the baseline makes, as its records name it
    converter: ClassVar[str] = "onnxmltools"  # what writes its ONNX-ML export (pipeline.prepare.sources.trees)

    def reads(self, head: bytes, path: Path) -> bool:
        """Whether a file with these first bytes (and this name) is this library's model."""
        raise NotImplementedError

    def open(self, path: Path) -> Ensemble:
        raise NotImplementedError

    def predictor(self, ensemble: Ensemble, threads: int) -> Callable[[np.ndarray], np.ndarray]:
        """The library's fastest call for dense rows, at `threads`: P(1) for a binary classifier."""
        raise NotImplementedError

    def splits(self, booster: Any) -> list[tuple[int, float]]:
        """(feature, threshold) of every numerical split; categorical splits are no thresholds."""
        raise NotImplementedError

    def booster_of(self, estimator: Any) -> Any:
        """The booster inside one of the library's scikit-learn-API estimators."""
        raise NotImplementedError

    def treelite_model(self, booster: Any, path: Path) -> Any:
        """The model treelite's frontend reads from the booster or its file (the registry lists the libraries
        the treelite variant applies to)."""
        raise NotImplementedError

    def ranks(self, objective: str) -> bool:
        return objective.startswith("rank")


class XGBoost(Library):
    """XGBoost: JSON or UBJSON (`learner` among the first bytes) or the legacy binary; `inplace_predict` (no DMatrix
    per call); a row goes left below a split's threshold."""

    name, suffix, call = "xgboost", ".json", "inplace_predict"
    binary, multiclass = ("binary:logistic",), ("multi:softprob",)

    def reads(self, head: bytes, path: Path) -> bool:
        return path.suffix in XGBOOST_BINARY or (path.suffix in (".json", ".ubj") and b"learner" in head)

    def open(self, path: Path) -> Ensemble:
        import xgboost

        booster = xgboost.Booster(model_file=str(path))
        learner = json.loads(booster.save_config())["learner"]
        classes = max(int(learner["learner_model_param"].get("num_class", "0")), 1)
        return Ensemble(self, booster, learner["objective"]["name"], classes, booster.num_features(),
                        list(booster.feature_names or []), xgboost.__version__)  # fmt: skip

    def predictor(self, ensemble: Ensemble, threads: int) -> Callable[[np.ndarray], np.ndarray]:
        booster = ensemble.booster
        booster.set_param({"nthread": threads})
        return lambda x: booster.inplace_predict(x, validate_features=False)

    def splits(self, booster: Any) -> list[tuple[int, float]]:
        trees = json.loads(booster.save_raw("json"))["learner"]["gradient_booster"]["model"]["trees"]
        return [(f, t) for tree in trees
                for f, t, left, kind in zip(tree["split_indices"], tree["split_conditions"], tree["left_children"],
                                            tree.get("split_type", [0] * len(tree["left_children"])), strict=True)
                if left != -1 and kind == 0]  # fmt: skip

    def booster_of(self, estimator: Any) -> Any:
        return estimator.get_booster()

    def treelite_model(self, booster: Any, path: Path) -> Any:
        import treelite

        return treelite.frontend.from_xgboost(booster)


class LightGBM(Library):
    """LightGBM's text model (its first line `tree`); `Booster.predict`; a row goes left at or below a threshold,
    compared in double."""

    name, suffix, call = "lightgbm", ".txt", "Booster.predict"
    binary, multiclass = ("binary",), ("multiclass", "softmax", "multiclassova", "ova")

    def reads(self, head: bytes, path: Path) -> bool:
        return head[:5].rstrip() == b"tree"

    def open(self, path: Path) -> Ensemble:
        import lightgbm

        booster = lightgbm.Booster(model_file=str(path))
        header = lightgbm_header(path)  # its parameters section, which Booster.params reads, is optional (v2 has none)
        objective = header.get("objective", "").split(" ")[0]
        return Ensemble(self, booster, objective, int(header.get("num_class", 1)), booster.num_feature(),
                        booster.feature_name(), lightgbm.__version__)  # fmt: skip

    def predictor(self, ensemble: Ensemble, threads: int) -> Callable[[np.ndarray], np.ndarray]:
        booster = ensemble.booster
        return lambda x: booster.predict(x, num_threads=threads)

    def splits(self, booster: Any) -> list[tuple[int, float]]:
        text = booster.model_to_string()
        features = re.findall(r"^split_feature=(.*)$", text, re.M)
        thresholds = re.findall(r"^threshold=(.*)$", text, re.M)
        kinds = re.findall(r"^decision_type=(.*)$", text, re.M)
        return [(int(f), float(t)) for fs, ts, ks in zip(features, thresholds, kinds, strict=True)
                for f, t, k in zip(fs.split(), ts.split(), ks.split(), strict=True) if not int(k) & 1]  # fmt: skip

    def booster_of(self, estimator: Any) -> Any:
        return estimator.booster_

    def ranks(self, objective: str) -> bool:
        return objective in ("lambdarank", "rank_xendcg")

    def treelite_model(self, booster: Any, path: Path) -> Any:
        import treelite

        return treelite.frontend.load_lightgbm_model(str(path))


class CatBoost(Library):
    """CatBoost's binary model (.cbm, `CBM1` first); its own `predict` (probabilities for a classifier, the raw
    formula otherwise, the exponent of a Poisson or Tweedie one); oblivious trees whose splits are the float32
    borders of each feature (a row goes right above a border)."""

    name, suffix, call = "catboost", ".cbm", "CatBoost.predict"
    converter = "CatBoost's own ONNX export"
    binary, multiclass = ("Logloss", "CrossEntropy"), ("MultiClass", "MultiClassOneVsAll")
    RANKING = ("YetiRank", "YetiRankPairwise", "PairLogit", "PairLogitPairwise", "QueryRMSE", "QuerySoftMax",
               "StochasticRank", "LambdaMart", "QueryCrossEntropy")  # fmt: skip

    def reads(self, head: bytes, path: Path) -> bool:
        return head[:4] == b"CBM1"

    def open(self, path: Path) -> Ensemble:
        import catboost

        booster = catboost.CatBoost()
        booster.load_model(str(path))
        objective = str(booster.get_all_params().get("loss_function", "")).split(":")[0]
        classes = len(booster.classes_) if objective in self.multiclass and booster.classes_ is not None else 1
        return Ensemble(self, booster, objective, classes, len(booster.feature_names_), list(booster.feature_names_),
                        catboost.__version__)  # fmt: skip

    def predictor(self, ensemble: Ensemble, threads: int) -> Callable[[np.ndarray], np.ndarray]:
        booster, objective = ensemble.booster, ensemble.objective
        if objective in self.binary:
            return lambda x: booster.predict(x, prediction_type="Probability", thread_count=threads)[:, 1]
        kind = "Probability" if objective in self.multiclass else "RawFormulaVal"
        kind = "Exponent" if objective in ("Poisson", "Tweedie") else kind
        return lambda x: booster.predict(x, prediction_type=kind, thread_count=threads)

    def splits(self, booster: Any) -> list[tuple[int, float]]:
        return [(int(feature), float(border)) for feature, borders in booster.get_borders().items()
                for border in borders]  # fmt: skip

    def booster_of(self, estimator: Any) -> Any:
        return estimator

    def ranks(self, objective: str) -> bool:
        return objective in self.RANKING


XGBOOST_BINARY = (".model", ".bst", ".xgb")  # XGBoost's legacy binary format: no marker to read before loading it
# by their first bytes, then XGBoost's legacy binary by its name (a LightGBM text file named .model is LightGBM's)
LIBRARIES: dict[str, Library] = {library.name: library for library in (LightGBM(), CatBoost(), XGBoost())}


@dataclass(frozen=True)
class Ensemble:
    """A tree ensemble file as its library loaded it, with what the file says of itself."""

    library: Library
    booster: Any
    objective: str
    classes: int  # the class columns of a multi-class model; 1 otherwise
    features: int
    feature_names: list[str]
    version: str  # the library's

    @property
    def name(self) -> str:
        """The library's name: the source kind's."""
        return self.library.name

    @property
    def answer(self) -> Answer:
        if self.objective in self.library.binary:
            return "binary"
        if self.objective in self.library.multiclass:
            return "classes"
        return "values"

    @property
    def ranks(self) -> bool:
        """A learning-to-rank objective (XGBoost's rank:*, LightGBM's lambdarank, CatBoost's YetiRank, ...): its score
        per row is read by the order it puts rows in."""
        return self.library.ranks(self.objective)

    def predictor(self, threads: int) -> Callable[[np.ndarray], np.ndarray]:
        return self.library.predictor(self, threads)

    def predict(self, x: np.ndarray, threads: int = 1) -> np.ndarray:
        return shaped(self.predictor(threads)(x), self.answer)


def library_of(path: Path) -> Library | None:
    """The library whose model `path` is, by its first bytes (a legacy XGBoost binary by its name); None."""
    if not path.is_file():
        return None
    with open(path, "rb") as file:
        head = file.read(4096)
    return next((library for library in LIBRARIES.values() if library.reads(head, path)), None)


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
    """The ensemble in `path`, by the library its first bytes name (XGBoost's loader, which reads any of its
    formats, when none does); the library's error when it cannot load it."""
    return (library_of(path) or LIBRARIES["xgboost"]).open(path)


class BoosterSession(Session):
    def __init__(self, path: Path, threads: int, config: Config) -> None:
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
        library = f"{ensemble.name} {ensemble.version}"
        return Details(threads=self._threads, library=library, mode=ensemble.library.call).as_dict()


def load(artifact: Path, threads: int, config: Config, target: str = "cpu") -> BoosterSession:
    return BoosterSession(artifact, threads, config)
