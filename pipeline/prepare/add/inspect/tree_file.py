"""`add` reading a gradient-boosted tree ensemble in its library's own file: XGBoost's JSON or UBJSON model (and
its legacy binary as .model/.bst/.xgb), LightGBM's text model, CatBoost's .cbm; or one of their scikit-learn-API
estimators (XGBClassifier, LGBMRegressor, CatBoostClassifier, ...) found in a pickle
(pipeline.prepare.add.inspect.sklearn_file hands it over: its booster is saved as the library's own file, what the
baseline and every converter read). The feature count and names, the objective and the classes are read off the
file; the input's dtype is the eval rows' (float32 or float64: LightGBM compares in double, so float64 rows stay
float64), float32 without eval data."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.core.errors import first_line
from pipeline.core.registry import VARIANTS
from pipeline.prepare.add.flags import Flags
from pipeline.prepare.add.inferred import AddError, Entry, Inferred, Input


def reads(path: Path) -> bool:
    """A file whose first bytes say it is a tree model (or a legacy XGBoost binary by its name): the libraries'
    own markers (pipeline.runtimes.boosters.Library.reads), nothing loaded."""
    from pipeline.runtimes.boosters import library_of

    return library_of(path) is not None


def eval_features(flags: Flags, features: int) -> tuple[str, np.dtype] | None:
    """The eval file's feature matrix (2-D, `features` columns, floats): its name and dtype."""
    if flags.eval is None or flags.eval.suffix != ".npz":
        return None
    with np.load(flags.eval) as data:
        for key in data.files:
            if data[key].ndim == 2 and data[key].shape[1] == features and data[key].dtype.kind == "f":
                return key, data[key].dtype
    return None


def inspect_trees(name: str, path: Path, flags: Flags) -> Inferred:
    """The entry of a tree ensemble's own file."""
    from pipeline.runtimes.boosters import open_ensemble

    try:
        ensemble = open_ensemble(path)
    except Exception as error:
        raise AddError(f"{path}: not a tree model XGBoost, LightGBM or CatBoost can load: {type(error).__name__}: "
                       f"{first_line(error)}") from None  # fmt: skip
    return inferred(path.name, path, ensemble, flags, f"a {ensemble.name} {ensemble.version} model file")


def from_estimator(pickle: Path, estimator: Any, flags: Flags) -> Inferred:
    """The entry of a scikit-learn-API tree estimator loaded from `pickle`: its booster saved in the library's own
    format in a scratch folder, and that file the model."""
    from pipeline.runtimes.boosters import LIBRARIES

    scratch = Path(tempfile.mkdtemp(prefix="add-trees-"))
    library = LIBRARIES[type(estimator).__module__.split(".")[0]]
    file = scratch / f"{pickle.stem}{library.suffix}"
    library.booster_of(estimator).save_model(str(file))
    ensemble = library.open(file)
    how = (f"a {type(estimator).__name__} loaded on --trust-pickle, its booster saved as {file.name} "
           f"({library.name}'s own format: the baseline and the converters read that)")  # fmt: skip
    found = inferred(file.name, file, ensemble, flags, how)
    found.scratch.append(scratch)
    return found


def inferred(file: str, path: Path, ensemble: Any, flags: Flags, what: str) -> Inferred:
    from pipeline.runtimes.boosters import output_name

    features = ensemble.features
    found = eval_features(flags, features)
    input_name, dtype = (found[0], found[1].name) if found else ("X", "float32")
    dtype = dtype if dtype in ("float32", "float64") else "float32"
    entry = Entry(ensemble.name, file=file, inputs={input_name: Input(["batch", features], dtype)}, onnx_ml=True)
    named = ensemble.feature_names
    shown = f"{', '.join(named[:6])}{', ...' if len(named) > 6 else ''}" if named else "unnamed"
    reading = {"binary": "a binary classifier: P(class 1) given as two columns [1 - p, p], judged by the class "
                         "each row takes (the model's threshold 0.5)",
               "classes": f"{ensemble.classes} class probabilities per row, judged by the class each row takes",
               "values": "one value per row (a regression's), judged by its largest error against the output's "
                         "range"}[ensemble.answer]  # fmt: skip
    if ensemble.ranks:
        entry.judged_as = {output_name(ensemble.answer): "ranking"}
        reading = "a ranking score per row, judged by the order it puts rows in (every pair the source tells apart)"
    notes = [
        f"{what}: objective {ensemble.objective}, {features} features ({shown}); its input {input_name!r} {dtype} "
        f"[batch, {features}]" + (f" (the eval data's {input_name!r})" if found else ""),
        f"its output {output_name(ensemble.answer)!r}: {reading}",
        f"its baseline is {ensemble.name}'s own predict (variant {ensemble.name}): every speed-up is stated "
        f"against it; {ensemble.library.converter} writes ONNX-ML TreeEnsemble operators, which ONNX Runtime runs "
        "(onnx_fp32, onnx_opt) and the variants that cannot (OpenVINO, FP16, INT8) get no stage"
        + ("; treelite compiles the trees" if ensemble.name in (VARIANTS["treelite"].sources or ()) else ""),
        "every variant is also run on rows placed on the model's own split thresholds (and one float step either "
        "side): select wants their decisions exactly as the library's",
    ]
    return Inferred(entry, {file: path}, [file], notes, output_names=[output_name(ensemble.answer)])
