"""A scikit-learn estimator or pipeline as it was saved (joblib or pickle): the reference outputs are its own
(`predict_proba`, else `predict`: pipeline.runtimes.sklearn_rt, shared with the `sklearn` baseline); the ONNX
export is skl2onnx's, its initial type the spec's one input (numbers as float or int tensors, text as a
string tensor [batch, 1]), probabilities as a plain tensor (`zipmap: False`), the label output left out (a
classifier's label is the argmax of its probabilities). The versions of scikit-learn and skl2onnx that did it
are recorded, and a pickle written by another scikit-learn release is said.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pipeline.core.config import PARAMS_FILE, ExportConfig, InputSpec, ModelConfig
from pipeline.core.data import Arrays
from pipeline.core.errors import ConfigError, ModelFileError, first_line
from pipeline.prepare.sources.base import SourceModel, output_names
from pipeline.runtimes.sklearn_rt import call, load_estimator, output_names_of

SKL2ONNX_OPSETS = {"": 18, "ai.onnx.ml": 3}  # the newest each domain's converters in skl2onnx 1.20 write


def initial_type(name: str, spec: InputSpec) -> tuple[str, Any]:
    """skl2onnx's type of the spec's input: the batch axis open, the features as the spec fixes them."""
    from skl2onnx.common import data_types

    types = {"float32": data_types.FloatTensorType, "float64": data_types.DoubleTensorType,
             "int64": data_types.Int64TensorType, "int32": data_types.Int32TensorType,
             "str": data_types.StringTensorType}  # fmt: skip
    if spec.dtype not in types:
        raise ConfigError(f"{PARAMS_FILE}: inputs.{name}.dtype: skl2onnx takes {', '.join(types)}, not {spec.dtype}")
    return name, types[spec.dtype]([None, *spec.row_shape])


class SklearnSource(SourceModel):
    """An estimator saved in models/<name>/ (joblib or pickle), with one input."""

    kind = "sklearn"

    def __init__(self, name: str, config: ModelConfig, root: Path, dims: dict[str, int] | None = None) -> None:
        super().__init__(name, config, root, dims)
        path = self.require_file()
        try:
            self.estimator, self._warnings = load_estimator(path)
        except Exception as error:
            raise ModelFileError(
                f"{path}: not a scikit-learn model joblib can load ({PARAMS_FILE}: {self.field}.file): "
                f"{type(error).__name__}: {first_line(error)}"
            ) from None
        if not hasattr(self.estimator, "predict"):
            raise ModelFileError(f"{path}: holds a {type(self.estimator).__name__}, not an estimator with predict")
        if len(config.inputs) != 1:
            raise ConfigError(f"{PARAMS_FILE}: {self.field}.inputs: a scikit-learn estimator takes one input")
        self._input = next(iter(config.inputs))
        self._names = output_names(config, 1, self.field, output_names_of(self.estimator))
        self.probe(self.predict)

    @property
    def output_names(self) -> list[str]:
        return self._names

    @property
    def notes(self) -> list[str]:
        return [f"loading it warned: {said}" for said in self._warnings]

    def predict(self, inputs: Arrays) -> Arrays:
        return {self._names[0]: call(self.estimator, inputs[self._input])}

    def export_onnx(self, path: Path, export: ExportConfig) -> dict[str, Any]:
        exported = export_estimator(self.estimator, self._input, self.config.inputs[self._input], self._names, path,
                                    export.opset, self.path)  # fmt: skip
        return exported | ({"load_warnings": self._warnings} if self._warnings else {})


def export_estimator(
    estimator: Any, input_name: str, spec: InputSpec, names: list[str], path: Path, opset: int, source_file: Path
) -> dict[str, Any]:
    """skl2onnx's graph of `estimator` written to `path`: its one input typed by the spec, the probabilities (or the
    prediction) kept as a plain tensor named `names`, the label left out; what was done. `add` calls it on the
    estimator it loaded (pipeline.prepare.add.inspect.sklearn_file), the export stage through SklearnSource; a
    conversion skl2onnx refuses is a ModelFileError naming `source_file`, the user's pickle."""
    import skl2onnx
    import sklearn

    from pipeline.core import onnx_files

    start = time.perf_counter()
    opsets = SKL2ONNX_OPSETS | {"": min(opset, SKL2ONNX_OPSETS[""])}
    try:
        model = skl2onnx.to_onnx(estimator, initial_types=[initial_type(input_name, spec)],
                                 options={"zipmap": False}, target_opset=opsets)  # fmt: skip
    except Exception as error:
        raise ModelFileError(f"{source_file}: skl2onnx could not convert the {type(estimator).__name__}: "
                             f"{type(error).__name__}: {first_line(error)}") from None  # fmt: skip
    onnx_files.keep_output(model, "probabilities" if hasattr(estimator, "predict_proba") else "variable", names)
    rescued = onnx_files.with_available_locale(model)
    onnx_files.save(model, path)
    return {
        "exporter": f"skl2onnx {skl2onnx.__version__} (scikit-learn {sklearn.__version__})",
        "export_s": time.perf_counter() - start,
        "estimator": type(estimator).__name__,
        **({"rescues": [rescued]} if rescued else {}),
    }


def load(name: str, config: ModelConfig, root: Path, dims: dict[str, int] | None = None) -> SklearnSource:
    return SklearnSource(name, config, root, dims)
