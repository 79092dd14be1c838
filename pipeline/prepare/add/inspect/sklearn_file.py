"""`add` reading a scikit-learn estimator or pipeline saved with joblib or pickle (.joblib, .pkl, .pickle, .p),
only on the user's `--trust-pickle`: loading a pickle runs code from the file. Its one input is read off the
estimator and the eval rows: numbers [batch, n_features_in_] in the eval data's float or int dtype (float32
without eval data), text (a pipeline that starts with a text vectorizer) as strings [batch, 1]. skl2onnx
converts the estimator it loaded once here, so `add` says whether its graph needs ONNX-ML operators (`onnx_ml`); the
pickle is unpickled once per process (sklearn_rt.load_estimator), the check of the written entry included."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.core.config import TREE_SOURCES
from pipeline.core.errors import first_line
from pipeline.prepare.add.flags import Flags
from pipeline.prepare.add.inferred import AddError, Entry, Inferred, Input

PICKLES = (".joblib", ".pkl", ".pickle", ".p")


def reads(path: Path) -> bool:
    return path.is_file() and path.suffix in PICKLES


def eval_arrays(flags: Flags) -> dict[str, np.ndarray]:
    if flags.eval is None or flags.eval.suffix != ".npz":
        return {}
    with np.load(flags.eval) as data:
        return {key: data[key] for key in data.files}


def takes_text(estimator: Any) -> bool:
    """A pipeline (or estimator) whose first step vectorizes raw text (CountVectorizer, TfidfVectorizer,
    HashingVectorizer): it reads strings, not a feature matrix."""
    first = estimator.steps[0][1] if hasattr(estimator, "steps") else estimator
    return hasattr(first, "build_analyzer")


def the_input(path: Path, estimator: Any, arrays: dict[str, np.ndarray]) -> tuple[str, Input, str]:
    """The estimator's one input: its name, spec, and what told it."""
    if takes_text(estimator):
        texts = [key for key, a in arrays.items() if a.dtype.kind in "UO" and a.ndim in (1, 2)]
        return (texts[0] if texts else "text"), Input(["batch", 1], "str"), "a text vectorizer first: strings"
    features = getattr(estimator, "n_features_in_", None)
    if features is None:
        raise AddError(f"{path}: the {type(estimator).__name__} does not say how many features it takes "
                       "(no n_features_in_): it was never fitted, or fitted on a DataFrame")  # fmt: skip
    found = [key for key, a in arrays.items() if a.ndim == 2 and a.shape[1] == features and a.dtype.kind in "fiu"]
    if not found:
        return "X", Input(["batch", int(features)], "float32"), f"n_features_in_ = {features}"
    dtype = arrays[found[0]].dtype
    dtype = dtype.name if dtype.name in ("float32", "float64", "int64", "int32") else "float32"
    return (
        found[0],
        Input(["batch", int(features)], dtype),
        f"n_features_in_ = {features}, the eval data's {found[0]!r}",
    )


def inspect_sklearn(name: str, path: Path, flags: Flags) -> Inferred:
    """The entry of a saved estimator, loaded only on `--trust-pickle`; `name` is the model's."""
    from pipeline.core.config import ExportConfig, InputSpec
    from pipeline.prepare.sources.onnxfile import onnx_ml_operators
    from pipeline.prepare.sources.sklearn import export_estimator
    from pipeline.runtimes.sklearn_rt import load_estimator, output_names_of

    if not flags.trust_pickle:
        raise AddError(f"{path}: a pickle (scikit-learn's joblib or pickle file): loading it runs code from the file. "
                       "Add it with --trust-pickle only if you trust where it came from")  # fmt: skip
    try:
        estimator, warned = load_estimator(path)
    except Exception as error:
        raise AddError(f"{path}: not a scikit-learn model joblib can load: {type(error).__name__}: "
                       f"{first_line(error)}") from None  # fmt: skip
    if not hasattr(estimator, "predict"):
        raise AddError(f"{path}: holds a {type(estimator).__name__}, not an estimator with predict")
    if type(estimator).__module__.split(".")[0] in TREE_SOURCES:  # in as the library's own file (tree_file)
        from pipeline.prepare.add.inspect.tree_file import from_estimator

        return from_estimator(path, estimator, flags)
    input_name, spec, how = the_input(path, estimator, eval_arrays(flags))
    entry = Entry("sklearn", file=path.name, inputs={input_name: spec})
    notes = [f"a {type(estimator).__name__} loaded on --trust-pickle; its input {input_name!r} {spec.dtype} "
             f"{spec.shape} ({how})", *(f"loading it warned: {said}" for said in warned)]  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="add-sklearn-") as scratch:
        graph = Path(scratch) / "model.onnx"
        export_estimator(estimator, input_name, InputSpec.model_validate(spec.as_yaml()), output_names_of(estimator),
                         graph, ExportConfig().opset, path)  # fmt: skip
        import onnx

        if operators := onnx_ml_operators(onnx.load(str(graph))):
            entry.onnx_ml = True
            notes.append(f"skl2onnx writes ONNX-ML operators ({', '.join(operators)}): ONNX Runtime runs them; the "
                         "variants that cannot (OpenVINO, FP16, INT8) get no stage")  # fmt: skip
    notes.append("its baseline is the estimator itself (variant sklearn): every speed-up is stated against "
                 "scikit-learn's own predict")  # fmt: skip
    return Inferred(entry, {path.name: path}, [path.name], notes, output_names=output_names_of(estimator))
