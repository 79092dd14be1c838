"""Gradient-boosted trees as they ship (XGBoost JSON, LightGBM text, their scikit-learn-API estimators pickled):
`add` reads each with one command; the source answers as the library's own predict; onnxmltools' ONNX-ML export
and treelite's compiled trees answer alike on the scoring rows and on rows placed on every split threshold, and
where a converter moves a threshold (float32 in ONNX's TreeEnsemble, float64 in LightGBM) those rows show it
and select refuses the variant. Through `dvc repro`, predict and the contest: tests/test_e2e_add.py."""

from __future__ import annotations

import shutil

import joblib
import numpy as np
import onnxruntime as ort
import pytest
import yaml

from pipeline import runtimes
from pipeline.core.config import Constraints, ExportConfig, ModelConfig
from pipeline.core.data import DataSet
from pipeline.core.errors import NotApplicable
from pipeline.core.evaluate import Judging, edge_block, fidelity_block
from pipeline.core.quality import edge_violations, quality_violations
from pipeline.core.records import EdgeRows, Measured
from pipeline.prepare.add.inspect import tree_file
from pipeline.prepare.sources import load_source
from pipeline.prepare.sources.trees import (
    counted_node_ids,
    edge_values,
    lightgbm_export,
    onnxmltools_export,
    splits,
)
from tests.model_forms import TREE_FILES, write_boosted
from tests.test_add import params_of, project, run_add  # noqa: F401 - `project` is a fixture

LIBRARIES = ["xgboost", "lightgbm", "catboost"]


def as_source(tmp_path, library: str, task: str):
    """The library's own file of a small seeded ensemble as a catalog source, with its held-out rows."""
    path, rows = write_boosted(tmp_path / "forms", library, "file", task)
    folder = tmp_path / "models" / "m"
    folder.mkdir(parents=True)
    shutil.copy(path, folder / path.name)
    held = np.load(rows)
    config = ModelConfig(source=library, file=path.name, onnx_ml=True,
                         inputs={"X": {"shape": ["batch", held["X"].shape[1]], "dtype": "float32"}})  # fmt: skip
    return load_source("m", config, tmp_path), held


def onnx_session(source, tmp_path):
    source.export_onnx(tmp_path / "model.onnx", ExportConfig())
    session = ort.InferenceSession(str(tmp_path / "model.onnx"), providers=["CPUExecutionProvider"])
    return lambda x: {source.output_names[0]: session.run(None, {"X": x})[0]}


@pytest.mark.parametrize("library", LIBRARIES)
def test_the_source_answers_as_the_library_and_the_onnx_ml_export_keeps_every_class(library, tmp_path):
    source, held = as_source(tmp_path, library, "binary")
    x = held["X"]
    estimator_path, _ = write_boosted(tmp_path / "pickled", library, "pickle", "binary")
    want = joblib.load(estimator_path).predict_proba(x)  # the same seeded training, through the estimator
    got = source.predict({"X": x})["probabilities"]
    assert source.output_names == ["probabilities"] and got.shape == (len(x), 2)
    assert np.abs(got - want).max() < 1e-6
    exported = onnx_session(source, tmp_path)(x)["probabilities"]
    assert (exported.argmax(1) == want.argmax(1)).all() and np.abs(exported - want).max() < 1e-5


def test_lightgbm_node_ids_counted_give_the_graph_the_librarys_search_gives(tmp_path):
    """The constant-time node ids (counted_node_ids) write the very graph onnxmltools' own search writes, and the
    search is back in place afterwards."""
    from onnxmltools.convert.lightgbm.operator_converters import LightGbm

    source, _ = as_source(tmp_path, "lightgbm", "classes")
    searched = LightGbm._create_node_id
    with counted_node_ids():
        assert LightGbm._create_node_id is not searched
    counted, _ = lightgbm_export(source.ensemble, "X", "float32", 15)
    assert LightGbm._create_node_id is searched
    ensemble = source.ensemble
    own, _ = onnxmltools_export("lightgbm", ensemble.booster, ensemble.features, "X", "float32", 15, zipmap=False)
    counted.graph.name = own.graph.name  # a fresh uuid each conversion
    assert counted.SerializeToString() == own.SerializeToString()


@pytest.mark.parametrize("library", LIBRARIES)
def test_edge_rows_sit_on_the_models_own_thresholds_and_one_step_either_side(library, tmp_path):
    source, held = as_source(tmp_path, library, "classes")
    features, thresholds = splits(source.ensemble)
    assert len(features) and (features < held["X"].shape[1]).all()
    edges = source.edge_rows(DataSet({"X": held["X"]}))
    assert len(edges) == 3 * len(features) and "split thresholds" in edges.origin
    steps = edge_values(thresholds, np.dtype(np.float32))
    assert (steps[:, 0] < steps[:, 1]).all() and (steps[:, 1] < steps[:, 2]).all()
    rows = edges.inputs["X"].reshape(len(features), 3, -1)
    assert (rows[np.arange(len(features)), :, features] == steps).all()


def test_a_threshold_onnx_moves_shows_on_the_edge_rows_and_select_refuses_it(tmp_path):
    """LightGBM compares float32 features to float64 thresholds; ONNX's TreeEnsemble holds them as float32,
    so rows at a threshold take the other branch: on this seeded regression the export misses the library by
    a whole leaf on the eval rows already; treelite keeps LightGBM's doubles and every row."""
    source, held = as_source(tmp_path, "lightgbm", "values")
    edges = source.edge_rows(DataSet({"X": held["X"]}))
    edges.outputs = source.predict(edges.inputs)
    moved = edge_block(edges, onnx_session(source, tmp_path)(edges.inputs["X"]), Judging())
    assert moved["moved"] > 0 and moved["fidelity"]["prediction"]["output_kind"] == "values"
    compiled = compile_trees(source, tmp_path)
    kept = edge_block(edges, compiled.run(edges.inputs), Judging())
    assert kept["moved"] == 0 and kept["fidelity"]["prediction"]["max_abs_diff"] < 1e-3
    refused = edge_violations(EdgeRows.model_validate(moved), Constraints(max_rel_error=1e-4))
    assert refused and "on the split-threshold rows" in refused[0].message
    assert not edge_violations(EdgeRows.model_validate(kept), Constraints(max_rel_error=1e-4))


def test_a_decision_changed_on_an_edge_row_breaks_exactness_whatever_the_f1():
    block = {"output_kind": "class_scores", "top1_agreement": 0.999, "values_per_row": 2}
    edges = EdgeRows(rows=3000, origin="test", moved=3, fidelity={"probabilities": block})
    (found,) = edge_violations(edges, Constraints())
    assert found.constraint == "exact_edge_decisions" and "3 of 3000 rows" in found.message
    assert not edge_violations(edges, Constraints(exact_edge_decisions=False))


def compile_trees(source, tmp_path):
    from pipeline.optimize.passes.trees import Treelite, TreeliteConfig

    class Context:  # what Treelite.run reads
        model, root, out_dir = "m", tmp_path, tmp_path / "compiled"
        config = source.config
        source_info = type("Info", (), {"output_names": source.output_names})

    Context.out_dir.mkdir()
    built = Treelite().run(Context, TreeliteConfig())  # type: ignore[arg-type]
    assert built.details["trees"] > 0 and built.runtime_config["answer"] == source.ensemble.answer
    return runtimes.load("tl2cgen", Context.out_dir / built.entry, 1, built.runtime_config)


def compile_lleaves(source, tmp_path, config=None):
    from pipeline.optimize.passes.trees import Lleaves, LleavesConfig

    class Context:  # what Lleaves.run reads
        model, root, out_dir = "m", tmp_path, tmp_path / "lleaves"
        config = source.config
        source_info = type("Info", (), {"output_names": source.output_names})

    Context.out_dir.mkdir()
    built = Lleaves().run(Context, config or LleavesConfig())  # type: ignore[arg-type]
    assert built.details["target_cpu"] == "x86-64" and (Context.out_dir / built.entry).with_suffix(".so").is_file()
    return runtimes.load("lleaves", Context.out_dir / built.entry, 2, built.runtime_config)


@pytest.mark.parametrize("task", ["values", "classes", "binary"])
def test_lleaves_keeps_lightgbms_doubles_on_every_row_and_every_split_threshold(task, tmp_path):
    """lleaves compiles LightGBM's trees with its float64 thresholds: the same answers as Booster.predict on the
    scoring rows and on the split-threshold rows, where the float32 ONNX export moves (the test above)."""
    source, held = as_source(tmp_path, "lightgbm", task)
    session = compile_lleaves(source, tmp_path)
    name = source.output_names[0]
    assert np.array_equal(session.run({"X": held["X"]})[name], source.predict({"X": held["X"]})[name])
    edges = source.edge_rows(DataSet({"X": held["X"]}))
    edges.outputs = source.predict(edges.inputs)
    assert edge_block(edges, session.run(edges.inputs), Judging())["moved"] == 0
    assert session.details()["library"].startswith("lleaves") and session.details()["threads"] == 2


@pytest.mark.parametrize("library", LIBRARIES)
def test_the_baseline_and_the_compiled_trees_answer_as_the_source(library, tmp_path):
    source, held = as_source(tmp_path, library, "classes")
    want = source.predict({"X": held["X"]})["probabilities"]
    native = runtimes.load(library, source.path, 2, {"input_names": ["X"], "output_names": ["probabilities"]})
    assert np.array_equal(native.run({"X": held["X"]})["probabilities"], want)
    assert native.details()["library"].startswith(library) and native.details()["threads"] == 2
    if library == "catboost":  # treelite reads no CatBoost model: the registry gives it no treelite stage
        return
    compiled = compile_trees(source, tmp_path).run({"X": held["X"]})["probabilities"]
    assert (compiled.argmax(1) == want.argmax(1)).all() and np.abs(compiled - want).max() < 1e-5


def test_the_inspector_reads_tree_files_by_their_first_bytes_only(tmp_path):
    assert all(tree_file.reads(write_boosted(tmp_path, library, "file")[0]) for library in LIBRARIES)
    (tmp_path / "config.json").write_text('{"model_type": "bert"}')
    (tmp_path / "notes.txt").write_text("trees are nice\n")
    assert not tree_file.reads(tmp_path / "config.json") and not tree_file.reads(tmp_path / "notes.txt")


@pytest.mark.parametrize(("library", "form"), [(library, form) for library in LIBRARIES for form in ("file", "pickle")])
def test_add_takes_a_tree_file_or_its_pickled_estimator_with_one_command(
    project,  # noqa: F811
    tmp_path,
    monkeypatch,
    capsys,
    library,
    form,
):
    path, rows = write_boosted(tmp_path / "elsewhere", library, form)
    name = f"{library}_{form}"
    trust = ["--trust-pickle"] if form == "pickle" else []
    assert run_add(project, monkeypatch, name, str(path), "--eval", str(rows), *trust) == 0
    printed = capsys.readouterr().out
    objective = {"xgboost": "binary:logistic", "lightgbm": "binary", "catboost": "Logloss"}[library]
    assert f"objective {objective}, 30 features" in printed
    assert f"its baseline is {library}'s own predict (variant {library})" in printed
    entry = params_of(project)["catalog"][name]
    file = f"{library}_binary.{TREE_FILES[library]}"
    assert entry["source"] == library and entry["file"] == file and entry["onnx_ml"] is True
    assert entry["inputs"] == {"X": {"shape": ["batch", 30], "dtype": "float32"}} and entry["metric"] == "accuracy"
    assert (project / "models" / name / f"{file}.dvc").exists()
    if form == "pickle":
        assert "loaded on --trust-pickle, its booster saved as" in printed


def test_an_xgboost_model_with_named_features_exports(tmp_path):
    """insurance-predictor's model.json names its 47 features and types its one-hot columns as indicators ('i'):
    onnxmltools reads XGBoost's features only as 'f0', 'f1', ... ('Unable to interpret 'CallDuration'') and an
    indicator's split from a dump without its threshold (KeyError 'split_condition'): the export converts an
    unnamed, untyped copy."""
    import xgboost

    path, rows = write_boosted(tmp_path / "forms", "xgboost", "file")
    booster = xgboost.Booster(model_file=str(path))
    booster.feature_names = [f"column {i}" for i in range(booster.num_features())]
    booster.feature_types = ["i"] * booster.num_features()
    booster.save_model(str(path))
    folder = tmp_path / "models" / "named"
    folder.mkdir(parents=True)
    shutil.copy(path, folder / path.name)
    config = ModelConfig(source="xgboost", file=path.name, onnx_ml=True,
                         inputs={"X": {"shape": ["batch", 30], "dtype": "float32"}})  # fmt: skip
    source = load_source("named", config, tmp_path)
    assert source.ensemble.feature_names[0] == "column 0"
    x = np.load(rows)["X"]
    exported = onnx_session(source, tmp_path)(x)["probabilities"]
    assert np.abs(exported - source.predict({"X": x})["probabilities"]).max() < 1e-5


@pytest.mark.parametrize("library", LIBRARIES)
def test_a_ranker_is_judged_by_the_order_it_puts_rows_in(project, tmp_path, monkeypatch, capsys, library):  # noqa: F811
    """A learning-to-rank model's score is read by its order: `add` declares its output a ranking; treelite (and
    CatBoost's own ONNX export) keep every pair's order; onnxmltools writes an XGBoost ranker as a binary classifier
    (no ONNX-ML variant: skipped with that reason) and LightGBM's float32 thresholds move a few pairs; a variant
    that swaps two rows the source tells apart is refused, though its largest error is small against the scores'
    range."""
    path, rows = write_boosted(tmp_path / "elsewhere", library, "file", "ranking")
    assert run_add(project, monkeypatch, f"{library}_rank", str(path), "--eval", str(rows)) == 0
    assert "a ranking score per row, judged by the order it puts rows in" in capsys.readouterr().out
    assert params_of(project)["catalog"][f"{library}_rank"]["judged_as"] == {"prediction": "ranking"}
    source, held = as_source(tmp_path, library, "ranking")
    x, judging = held["X"], Judging(declared={"prediction": "ranking"})
    want = {"prediction": source.predict({"X": x})["prediction"]}
    if library == "catboost":  # CatBoost's own export: float32 borders, as CatBoost compares its float32 features
        exact = onnx_session(source, tmp_path)(x)
    else:
        exact = compile_trees(source, tmp_path).run({"X": x})
    kept = fidelity_block(want, exact, judging=judging)["prediction"]
    assert kept["output_kind"] == "ranking" and kept["pairs_ordered"] == 1.0 and kept["decision_flips"] == 0
    if library == "xgboost":
        with pytest.raises(NotApplicable, match="as a binary classifier"):
            source.export_onnx(tmp_path / "model.onnx", ExportConfig())
    elif library == "lightgbm":
        exported = fidelity_block(want, onnx_session(source, tmp_path)(x), judging=judging)["prediction"]
        assert exported["pairs_ordered"] < 1.0  # a row down the other branch of a float32 threshold, a leaf apart
    scores = want["prediction"].ravel()
    values, counts = np.unique(scores, return_counts=True)  # trees tie rows: two neighbouring scores held by one row
    low = next(i for i in range(len(values) - 1) if counts[i] == counts[i + 1] == 1)
    a, b = (int(np.flatnonzero(scores == values[i])[0]) for i in (low, low + 1))
    swapped = want["prediction"].copy()
    swapped[[a, b]] = swapped[[b, a]]
    block = fidelity_block(want, {"prediction": swapped}, judging=judging)["prediction"]
    assert block["decision_flips"] == 2 and block["pairs_ordered"] < 1.0
    refused = quality_violations(Measured(fidelity={"prediction": block}), Constraints(min_pairs_ordered=1.0))
    assert [v.constraint for v in refused] == ["min_pairs_ordered"]


def test_a_converter_that_does_not_apply_skips_the_onnx_variants_with_its_reason(tmp_path):
    """An XGBoost ranker has no ONNX-ML export (onnxmltools would write a classifier): the export says so, its
    ONNX variants are skipped as not applicable with that reason, and the library's baseline builds."""
    from pipeline.core.config import Params
    from pipeline.core.outcome import Kind
    from pipeline.optimize.stage import build_variant
    from pipeline.prepare.export import export_model

    source, _ = as_source(tmp_path, "xgboost", "ranking")
    config = source.config.model_copy(update={"judged_as": {"prediction": "ranking"}})
    raw = {"models": ["m"], "catalog": {"m": config.model_dump(mode="json", exclude_none=True)},
           "variants": {"onnx_fp32": {}, "xgboost": {}}}  # fmt: skip
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))  # the isolated build reads it
    params = Params.model_validate(raw)
    report = export_model("m", params, tmp_path)
    assert report["status"] == "skipped" and "as a binary classifier" in report["reason"]
    onnx = build_variant("m", "onnx_fp32", params, tmp_path)
    assert onnx.status == "skipped" and onnx.kind == Kind.NOT_APPLICABLE and "as a binary classifier" in onnx.reason
    assert build_variant("m", "xgboost", params, tmp_path).status == "ok"
