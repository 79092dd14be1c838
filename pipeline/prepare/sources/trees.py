"""A gradient-boosted tree ensemble in its library's own file (source: xgboost, lightgbm): the reference outputs
are the library's own predictions (pipeline.runtimes.boosters, shared with the baseline), the ONNX export is
onnxmltools' ONNX-ML TreeEnsemble (probabilities kept, the label output left out: it is their argmax).

A converted ensemble must take every row down the branches the library takes. Its thresholds can move (ONNX's
TreeEnsemble holds float32 thresholds, LightGBM float64 ones) and a converter can misread a base score, so
`edge_rows` places rows exactly on the model's own split thresholds and one float step either side: the
bench runs every variant on them and select wants their decisions kept without a tolerance."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.core.config import PARAMS_FILE, ExportConfig, ModelConfig
from pipeline.core.data import Arrays, DataSet
from pipeline.core.errors import ConfigError, ModelFileError, NotApplicable, first_line
from pipeline.prepare.sources.base import SourceModel, output_names
from pipeline.runtimes.boosters import Ensemble, open_ensemble, output_name

ONNXMLTOOLS_OPSET = 15  # the newest standard opset onnxmltools 1.16's tree converters accept
EDGE_SPLITS = 1000  # at most this many (feature, threshold) pairs, each giving three rows


def splits(ensemble: Ensemble) -> tuple[np.ndarray, np.ndarray]:
    """(feature, threshold) of every numerical split, unique: XGBoost's from its JSON model (a row goes left
    below the threshold), LightGBM's from its text model (left at or below it); categorical splits are not
    thresholds and are left out."""
    if ensemble.library == "xgboost":
        import json

        trees = json.loads(ensemble.booster.save_raw("json"))["learner"]["gradient_booster"]["model"]["trees"]
        pairs = [(f, t) for tree in trees
                 for f, t, left, kind in zip(tree["split_indices"], tree["split_conditions"], tree["left_children"],
                                             tree.get("split_type", [0] * len(tree["left_children"])), strict=True)
                 if left != -1 and kind == 0]  # fmt: skip
    else:
        text = ensemble.booster.model_to_string()
        features = re.findall(r"^split_feature=(.*)$", text, re.M)
        thresholds = re.findall(r"^threshold=(.*)$", text, re.M)
        kinds = re.findall(r"^decision_type=(.*)$", text, re.M)
        pairs = [(int(f), float(t)) for fs, ts, ks in zip(features, thresholds, kinds, strict=True)
                 for f, t, k in zip(fs.split(), ts.split(), ks.split(), strict=True) if not int(k) & 1]  # fmt: skip
    if not pairs:
        return np.zeros(0, np.int64), np.zeros(0, np.float64)
    unique = np.unique(np.array(pairs, dtype=np.float64), axis=0)
    return unique[:, 0].astype(np.int64), unique[:, 1]


def edge_values(thresholds: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Each threshold in the input's float type (nearest), and one step of that type below and above: [n, 3]."""
    nearest = thresholds.astype(dtype)
    below = np.nextafter(nearest, np.array(-np.inf, dtype))
    above = np.nextafter(nearest, np.array(np.inf, dtype))
    return np.stack([below, nearest, above], axis=1)


class TreeSource(SourceModel):
    """An XGBoost or LightGBM model file in models/<name>/, with one input: the feature matrix."""

    def __init__(self, name: str, config: ModelConfig, root: Path, dims: dict[str, int] | None = None) -> None:
        super().__init__(name, config, root, dims)
        path = self.require_file()
        try:
            self.ensemble = open_ensemble(path)
        except Exception as error:
            raise ModelFileError(f"{path}: not a model {config.source} can load ({PARAMS_FILE}: {self.field}.file): "
                                 f"{type(error).__name__}: {first_line(error)}") from None  # fmt: skip
        if self.ensemble.library != config.source:
            raise ConfigError(f"{PARAMS_FILE}: {self.field}.source: {path.name} is a {self.ensemble.library} model, "
                              f"not {config.source}")  # fmt: skip
        if len(config.inputs) != 1:
            raise ConfigError(f"{PARAMS_FILE}: {self.field}.inputs: a tree ensemble takes one input, its features")
        self._input = next(iter(config.inputs))
        self._names = output_names(config, 1, self.field, [output_name(self.ensemble.answer)])
        self.probe(self.predict)

    @property
    def kind(self) -> str:  # type: ignore[override]
        return self.ensemble.library

    @property
    def output_names(self) -> list[str]:
        return self._names

    def predict(self, inputs: Arrays) -> Arrays:
        return {self._names[0]: self.ensemble.predict(inputs[self._input])}

    def edge_rows(self, scoring: DataSet) -> DataSet | None:
        """Rows on the split thresholds (EDGE_SPLITS pairs at most, taken evenly): each a scoring row with one
        feature set to a threshold, one float step (of the input's type) below or above it."""
        features, thresholds = splits(self.ensemble)
        if not len(features) or not len(scoring):
            return None
        if len(features) > EDGE_SPLITS:
            keep = np.linspace(0, len(features) - 1, EDGE_SPLITS).round().astype(np.int64)
            features, thresholds = features[keep], thresholds[keep]
        base = np.asarray(scoring.inputs[self._input])
        rows = base[np.arange(3 * len(features)) % len(base)].copy()
        at = np.repeat(np.arange(len(features)), 3)
        rows[np.arange(len(rows)), features[at]] = edge_values(thresholds, base.dtype).reshape(-1)
        origin = (f"{len(rows)} rows on {len(features)} split thresholds (each {base.dtype} value nearest, one step "
                  "below and above), the other features a scoring row's")  # fmt: skip
        return DataSet({self._input: rows}, origin=origin)

    def export_onnx(self, path: Path, export: ExportConfig) -> dict[str, Any]:
        import onnxmltools
        from onnxmltools.convert.common.data_types import DoubleTensorType, FloatTensorType

        from pipeline.core import onnx_files

        start = time.perf_counter()
        ensemble = self.ensemble
        convert = onnxmltools.convert_xgboost if ensemble.library == "xgboost" else onnxmltools.convert_lightgbm
        options = {} if ensemble.library == "xgboost" else {"zipmap": False}
        booster = ensemble.booster
        if ensemble.library == "xgboost" and (booster.feature_names or booster.feature_types):
            # onnxmltools reads features as 'f%d' only, and an indicator feature's ('i') split from its dump, which
            # then names no threshold: an unnamed, untyped copy dumps every split with its threshold (the trees
            # and their predictions are the same; categorical splits ('c') are not converted either way)
            booster = booster.copy()
            booster.feature_names, booster.feature_types = None, None
        if ensemble.library == "xgboost" and ensemble.ranks:
            raise NotApplicable(f"onnxmltools {onnxmltools.__version__} writes XGBoost's ranking objective "
                                f"({ensemble.objective}) as a binary classifier (a TreeEnsembleClassifier's [N, 2] "
                                "probabilities), not the ranker's scores: no ONNX-ML variant")  # fmt: skip
        dtype = self.config.inputs[self._input].dtype
        tensor = DoubleTensorType if dtype == "float64" else FloatTensorType
        try:
            model = convert(booster, initial_types=[(self._input, tensor([None, ensemble.features]))],
                            target_opset=min(export.opset, ONNXMLTOOLS_OPSET), **options)  # fmt: skip
        except Exception as error:
            raise ModelFileError(f"{self.path}: onnxmltools could not convert the {ensemble.library} model "
                                 f"(objective {ensemble.objective}): {type(error).__name__}: "
                                 f"{first_line(error)}") from None  # fmt: skip
        onnx_files.keep_output(
            model, output_name(ensemble.answer) if ensemble.answer != "values" else None, self._names
        )
        onnx_files.save(model, path)
        return {
            "exporter": f"onnxmltools {onnxmltools.__version__} ({ensemble.library} {ensemble.version})",
            "export_s": time.perf_counter() - start,
            "objective": ensemble.objective,
        }


def load(name: str, config: ModelConfig, root: Path, dims: dict[str, int] | None = None) -> TreeSource:
    return TreeSource(name, config, root, dims)
