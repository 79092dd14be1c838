"""`add`'s inspectors, one module per kind of thing PATH can be, each reading the catalog entry off it:
INSPECTORS maps the kind to whether a path is one (`reads`) and what it implies (`inspect`), tried in
order; the first that reads PATH inspects it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from pipeline.prepare.add.flags import Flags
from pipeline.prepare.add.inferred import AddError, Inferred
from pipeline.prepare.add.inspect import (
    factory,
    hugging_face,
    keras_file,
    onnx_file,
    saved_model,
    sklearn_file,
    tflite_file,
    tree_file,
)


class Inspector(NamedTuple):
    reads: Callable[[Path], bool]  # whether PATH is of this kind
    inspect: Callable[[str, Path, Flags], Inferred]  # the model NAME's entry read off PATH


INSPECTORS = {  # a factory first: FILE.py:FUNCTION is no path that exists
    "code": Inspector(factory.reads, factory.inspect_code),
    "onnx": Inspector(onnx_file.reads, onnx_file.inspect_onnx),
    "keras": Inspector(keras_file.reads, keras_file.inspect_keras),
    "hugging_face": Inspector(hugging_face.reads, hugging_face.inspect_hf),
    "savedmodel": Inspector(saved_model.reads, saved_model.inspect_savedmodel),
    "tflite": Inspector(tflite_file.reads, tflite_file.inspect_tflite),
    "trees": Inspector(tree_file.reads, tree_file.inspect_trees),
    "sklearn": Inspector(sklearn_file.reads, sklearn_file.inspect_sklearn),
}


def inspect_model(name: str, path: Path, flags: Flags) -> Inferred:
    """The entry for whatever PATH is; the kinds `add` cannot read are named."""
    for inspector in INSPECTORS.values():
        if inspector.reads(path):
            return inspector.inspect(name, path, flags)
    if not path.exists():
        raise AddError(f"{path}: not found")
    raise AddError(
        f"{path}: not a model `add` reads: it takes an .onnx file (with its external-data files beside it), a "
        ".keras (or Keras 2 .h5) file, a SavedModel folder, a Hugging Face folder (config.json and weights), a "
        ".tflite file, an XGBoost model (.json, .ubj, .model), a LightGBM text model (.txt) or a CatBoost model "
        "(.cbm), a scikit-learn (or XGBoost / LightGBM / CatBoost estimator) .joblib/.pkl file (--trust-pickle), or "
        "a PyTorch or JAX factory as "
        "FILE.py:FUNCTION (docs/bring-your-own-model.md)"
    )
