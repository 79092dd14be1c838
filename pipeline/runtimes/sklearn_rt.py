"""scikit-learn: an estimator or pipeline as it was saved (joblib or pickle), called as its users call it:
`predict_proba` for a classifier (its probabilities), `predict` for any other estimator. Loading a pickle
runs code from the file: the TFLite and ONNX paths never do; this one only where the catalog names an
sklearn source, which `add` writes only on the user's `--trust-pickle`.

Its BLAS and OpenMP pools are held to `threads` (threadpoolctl, process-wide), as the other runtimes' are.
The estimator is stateless at predict time: concurrent requests share it."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.core.data import Arrays
from pipeline.runtimes import base
from pipeline.runtimes.base import Session

PROBABILITIES, PREDICTION = "probabilities", "prediction"  # the outputs, as the ONNX export names them too


class Config(base.Config):
    """What the scikit-learn adapter reads of its build's runtime_config (beside layout and code_root)."""

    input_names: list[str] | None = None  # its one input's name (an estimator names none)
    output_names: list[str] | None = None  # the names the outputs go by, in order


class Details(base.Details):
    """What its sessions report (Session.details); None in a record written before the key was."""

    threads: int | None = None
    sklearn: str | None = None  # its version
    estimator: str | None = None  # the estimator's class


def load_estimator(path: Path) -> tuple[Any, list[str]]:
    """The estimator in a joblib or pickle file (joblib reads both) and what loading it warned (a pickle
    written by another scikit-learn release); a file of the same bytes is unpickled once per process (`add`
    reads it, then checks the entry it wrote against the copy in models/NAME/)."""
    import hashlib

    return _unpickled(hashlib.sha256(path.read_bytes()).hexdigest(), path)


@functools.cache
def _unpickled(digest: str, path: Path) -> tuple[Any, list[str]]:
    import joblib
    from sklearn.exceptions import InconsistentVersionWarning

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        estimator = joblib.load(path)
    other = [w.message for w in seen if isinstance(w.message, InconsistentVersionWarning)]
    said = [f"pickled with scikit-learn {other[0].original_sklearn_version}, loaded with "
            f"{other[0].current_sklearn_version} ({', '.join(sorted({w.estimator_name for w in other}))}): "
            "scikit-learn does not promise the same answers across releases; the export and every variant are "
            "checked against this loaded estimator"] if other else []  # fmt: skip
    return estimator, said


def output_names_of(estimator: Any) -> list[str]:
    """What it answers: a classifier's probabilities (its label is their argmax), else its predictions."""
    return [PROBABILITIES] if hasattr(estimator, "predict_proba") else [PREDICTION]


def feed(x: np.ndarray) -> Any:
    """The rows as the estimator takes them: a string input [rows, 1] as the flat list of texts a text
    vectorizer reads, numbers as they are."""
    return x[:, 0] if x.dtype.kind in "UO" and x.ndim == 2 and x.shape[1] == 1 else x


def call(estimator: Any, x: np.ndarray) -> np.ndarray:
    rows = feed(x)
    if hasattr(estimator, "predict_proba"):
        return np.asarray(estimator.predict_proba(rows), dtype=np.float32)
    predicted = np.asarray(estimator.predict(rows))
    return predicted.astype(np.float32) if predicted.dtype.kind == "f" else predicted


class SklearnSession(Session):
    def __init__(self, path: Path, threads: int, config: Config) -> None:
        from threadpoolctl import threadpool_limits

        self._limits = threadpool_limits(limits=threads)  # process-wide, held while the session lives
        self._threads = threads
        self._estimator, _ = load_estimator(path)
        self.input_names = config.input_names or ["X"]
        self.output_names = config.output_names or output_names_of(self._estimator)

    def run(self, inputs: Arrays) -> Arrays:
        return {self.output_names[0]: call(self._estimator, inputs[self.input_names[0]])}

    def prepare(self, inputs: Arrays) -> Callable[[], Any]:
        estimator, x = self._estimator, inputs[self.input_names[0]]
        return lambda: call(estimator, x)

    def details(self) -> dict[str, Any]:
        import sklearn

        estimator = type(self._estimator).__name__
        return Details(threads=self._threads, sklearn=sklearn.__version__, estimator=estimator).as_dict()


def load(artifact: Path, threads: int, config: Config, target: str = "cpu") -> SklearnSession:
    return SklearnSession(artifact, threads, config)
