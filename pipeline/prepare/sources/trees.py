"""A gradient-boosted tree ensemble in its library's own file (source: xgboost, lightgbm, catboost): the reference
outputs are the library's own predictions (pipeline.runtimes.boosters, shared with the baseline), the ONNX export is
an ONNX-ML TreeEnsemble (`CONVERTERS`: onnxmltools' for XGBoost and LightGBM, CatBoost's own), its probabilities
kept and the label output left out (it is their argmax).

A converted ensemble must take every row down the branches the library takes. Its thresholds can move (ONNX's
TreeEnsemble holds float32 thresholds, LightGBM float64 ones) and a converter can misread a base score, so
`edge_rows` places rows exactly on the model's own split thresholds and one float step either side: the
bench runs every variant on them and select wants their decisions kept without a tolerance."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.core.config import PARAMS_FILE, ExportConfig, ModelConfig
from pipeline.core.data import Arrays, DataSet
from pipeline.core.errors import ConfigError, ModelFileError, NotApplicable, first_line
from pipeline.prepare.sources.base import SourceModel, output_names
from pipeline.runtimes.boosters import Ensemble, open_ensemble, output_name

ONNX_ML_OPSET = 15  # the newest standard opset onnxmltools 1.16's tree converters accept
EDGE_SPLITS = 1000  # at most this many (feature, threshold) pairs, each giving three rows


def splits(ensemble: Ensemble) -> tuple[np.ndarray, np.ndarray]:
    """(feature, threshold) of every numerical split, unique (the library's own reading: Library.splits)."""
    pairs = ensemble.library.splits(ensemble.booster)
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
    """An XGBoost, LightGBM or CatBoost model file in models/<name>/, with one input: the feature matrix."""

    def __init__(self, name: str, config: ModelConfig, root: Path, dims: dict[str, int] | None = None) -> None:
        super().__init__(name, config, root, dims)
        path = self.require_file()
        try:
            self.ensemble = open_ensemble(path)
        except Exception as error:
            raise ModelFileError(f"{path}: not a model {config.source} can load ({PARAMS_FILE}: {self.field}.file): "
                                 f"{type(error).__name__}: {first_line(error)}") from None  # fmt: skip
        if self.ensemble.name != config.source:
            raise ConfigError(f"{PARAMS_FILE}: {self.field}.source: {path.name} is a {self.ensemble.name} model, "
                              f"not {config.source}")  # fmt: skip
        if len(config.inputs) != 1:
            raise ConfigError(f"{PARAMS_FILE}: {self.field}.inputs: a tree ensemble takes one input, its features")
        self._input = next(iter(config.inputs))
        self._names = output_names(config, 1, self.field, [output_name(self.ensemble.answer)])
        self.probe(self.predict)

    @property
    def kind(self) -> str:  # type: ignore[override]
        return self.ensemble.name

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
        from pipeline.core import onnx_files

        start = time.perf_counter()
        ensemble = self.ensemble
        dtype = self.config.inputs[self._input].dtype
        try:
            model, exporter = CONVERTERS[ensemble.name](ensemble, self._input, dtype, min(export.opset, ONNX_ML_OPSET))
        except NotApplicable:
            raise
        except Exception as error:
            raise ModelFileError(
                f"{self.path}: the ONNX-ML export of the {ensemble.name} model (objective "
                f"{ensemble.objective}) failed: {type(error).__name__}: {first_line(error)}"
            ) from None
        onnx_files.keep_output(model, output_name(ensemble.answer), self._names)
        onnx_files.save(model, path)
        return {
            "exporter": f"{exporter} ({ensemble.name} {ensemble.version})",
            "export_s": time.perf_counter() - start,
            "objective": ensemble.objective,
        }


def onnxmltools_export(
    library: str, booster: Any, features: int, input_name: str, dtype: str, opset: int, **options: Any
) -> tuple[Any, str]:
    """onnxmltools' ONNX-ML TreeEnsemble of an XGBoost or LightGBM booster (`library`), its input typed as the rows."""
    import onnxmltools
    from onnxmltools.convert.common.data_types import DoubleTensorType, FloatTensorType

    convert = getattr(onnxmltools, f"convert_{library}")
    tensor = DoubleTensorType if dtype == "float64" else FloatTensorType
    model = convert(booster, initial_types=[(input_name, tensor([None, features]))], target_opset=opset, **options)
    return model, f"onnxmltools {onnxmltools.__version__}"


def xgboost_export(ensemble: Ensemble, input_name: str, dtype: str, opset: int) -> tuple[Any, str]:
    """onnxmltools on an unnamed, untyped copy of the booster; a ranker refused (it would be written as a
    classifier)."""
    if ensemble.ranks:
        raise NotApplicable(f"onnxmltools writes XGBoost's ranking objective ({ensemble.objective}) as a binary "
                            "classifier (a TreeEnsembleClassifier's [N, 2] probabilities), not the ranker's scores: no "
                            "ONNX-ML variant")  # fmt: skip
    booster = ensemble.booster
    if booster.feature_names or booster.feature_types:
        # onnxmltools reads features as 'f%d' only, and an indicator feature's ('i') split from its dump, which
        # then names no threshold: an unnamed, untyped copy dumps every split with its threshold (the trees
        # and their predictions are the same; categorical splits ('c') are not converted either way)
        booster = booster.copy()
        booster.feature_names, booster.feature_types = None, None
    return onnxmltools_export("xgboost", booster, ensemble.features, input_name, dtype, opset)


def lightgbm_export(ensemble: Ensemble, input_name: str, dtype: str, opset: int) -> tuple[Any, str]:
    """onnxmltools, its probabilities as a tensor (no ZipMap), its node ids numbered in constant time."""
    with counted_node_ids():
        return onnxmltools_export(
            "lightgbm", ensemble.booster, ensemble.features, input_name, dtype, opset, zipmap=False
        )


@contextmanager
def counted_node_ids() -> Iterator[None]:
    """onnxmltools' LightGBM converter (1.16) numbers a tree's nodes by searching its pool from 0 for the first
    free id, a quadratic walk: 9.8 s of s2cloudless's 10 s conversion (170 trees of up to 1539 nodes). Its pool
    holds only the ids that search gave, 0 to n - 1 in order, so the first free id is the pool's size: the same
    ids and the same graph (tests/test_trees.py compares the two), in linear time. Restored on leaving."""
    from onnxmltools.convert.lightgbm.operator_converters import LightGbm

    def next_id(pool: set[int]) -> int:
        pool.add(len(pool))
        return len(pool) - 1

    searched = getattr(LightGbm, "_create_node_id", None)
    if searched is None:  # a release without it numbers its nodes some other way: nothing to replace
        yield
        return
    LightGbm._create_node_id = next_id
    try:
        yield
    finally:
        LightGbm._create_node_id = searched


def catboost_export(ensemble: Ensemble, input_name: str, dtype: str, opset: int) -> tuple[Any, str]:
    """CatBoost's own ONNX export: its TreeEnsemble, the ZipMap read as its probabilities tensor, the input named as
    the entry's (CatBoost calls it 'features'); categorical or text features it cannot export."""
    import onnx

    from pipeline.core import onnx_files
    from pipeline.prepare.sources.onnxfile import zipmap_as_tensor

    if dtype == "float64":
        raise NotApplicable("CatBoost's ONNX export takes float32 features only (its input is float)")
    booster = ensemble.booster
    if booster.get_cat_feature_indices() or booster.get_text_feature_indices():
        raise NotApplicable("CatBoost exports no ONNX for a model with categorical or text features")
    with tempfile.TemporaryDirectory(prefix="catboost-onnx-") as scratch:
        file = Path(scratch) / "model.onnx"
        booster.save_model(str(file), format="onnx")
        model = onnx.load(str(file))
    if zipmap_as_tensor(model) and not any(o.domain in ("", "ai.onnx") for o in model.opset_import):
        model.opset_import.append(onnx.helper.make_opsetid("", opset))  # the Identity where its ZipMap was
    onnx_files.name_inputs(model, {model.graph.input[0].name: input_name})
    if ensemble.answer == "values":  # a regression's or a ranking's one value per row: [N] as [N, 1]
        model.graph.output[0].type.tensor_type.shape.dim.add().dim_value = 1
    return model, f"catboost {ensemble.version} save_model(format='onnx')"


CONVERTERS = {"xgboost": xgboost_export, "lightgbm": lightgbm_export, "catboost": catboost_export}


def load(name: str, config: ModelConfig, root: Path, dims: dict[str, int] | None = None) -> TreeSource:
    return TreeSource(name, config, root, dims)
