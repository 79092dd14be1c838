"""No variant is scored on rows it was calibrated or tuned on: the export's three roles are
disjoint, and a user's calib_data that repeats eval rows marks the figures in-sample."""

from __future__ import annotations

import json
import shutil

import numpy as np

from pipeline.core import layout
from pipeline.core.config import Params
from pipeline.core.data import DataSet, rows_in
from pipeline.core.records import Choice
from pipeline.core.records import source as records_source
from pipeline.core.records.build import BuildFacts
from pipeline.core.records.env import Cpu
from pipeline.measure.stage import in_sample
from pipeline.prepare.export import export_model
from pipeline.present.diagnosis import traps
from pipeline.present.summary import rows
from tests.conftest import tiny_config
from tests.helpers import metric


def exported(project, **overrides) -> tuple[dict, dict[str, DataSet]]:
    params = Params.model_validate(
        {"models": ["tiny"], "catalog": {"tiny": tiny_config(**overrides).model_dump()}, "variants": {"onnx_fp32": {}}}
    )
    assert export_model("tiny", params, project)["status"] == "ok"
    folder = layout.source_dir("tiny", project)
    sets = {
        role: DataSet.load(folder / name)
        for role, name in (
            ("scoring", layout.REFERENCE),
            ("calibration", layout.CALIBRATION),
            ("validation", layout.VALIDATION),
        )
    }
    return json.loads((folder / layout.SOURCE_INFO).read_text())["held_out"], sets


def assert_disjoint(sets: dict[str, DataSet]) -> None:
    scoring, calibration, validation = sets["scoring"], sets["calibration"], sets["validation"]
    assert rows_in(scoring.inputs, calibration.inputs) == 0
    assert rows_in(scoring.inputs, validation.inputs) == 0
    assert rows_in(calibration.inputs, validation.inputs) == 0


def test_eval_data_alone_is_split_into_disjoint_seeded_roles(tiny_project):
    held_out, sets = exported(tiny_project)
    assert {role: len(data) for role, data in sets.items()} == {"scoring": 32, "calibration": 16, "validation": 16}
    assert_disjoint(sets)
    assert held_out["calibration"]["rows_in_scoring"] == held_out["validation"]["rows_in_scoring"] == 0
    assert "split seed 0" in held_out["scoring"]["origin"]
    every_row = np.concatenate([data.inputs["x"] for data in sets.values()])
    original = np.load(tiny_project / "models" / "tiny" / "eval.npz")["x"]
    assert sorted(map(bytes, every_row)) == sorted(map(bytes, original))  # a partition: nothing lost
    assert sets["validation"].labels is not None and not sets["validation"].outputs  # outputs: when a fallback asks
    _, again = exported(tiny_project)
    assert np.array_equal(again["scoring"].inputs["x"], sets["scoring"].inputs["x"])  # deterministic


def test_calib_data_is_split_so_validation_never_repeats_calibration_rows(tiny_project):
    """Old behaviour: with calib_data, accuracy control validated on the very rows it calibrated on."""
    _, sets = exported(tiny_project, calib_data="eval.npz")
    calibration, validation = sets["calibration"].inputs["x"], sets["validation"].inputs["x"]
    assert len(calibration) + len(validation) == 64 and len(validation) == 32
    assert not {row.tobytes() for row in calibration} & {row.tobytes() for row in validation}


def test_generated_inputs_take_one_seed_per_role(tiny_project):
    held_out, sets = exported(tiny_project, eval_data=None)
    assert {len(data) for data in sets.values()} == {256}
    assert_disjoint(sets)
    roles = ("scoring", "calibration", "validation")
    assert all(f"seed {i})" in held_out[role]["origin"] for i, role in enumerate(roles))


def test_calib_data_that_repeats_eval_rows_marks_calibrated_figures_in_sample(tiny_project):
    folder = tiny_project / "models" / "tiny"
    shutil.copy(folder / "eval.npz", folder / "calib.npz")
    held_out, sets = exported(tiny_project, calib_data="calib.npz")
    assert len(sets["scoring"]) == 64  # with calib_data every eval row scores
    assert held_out["calibration"]["rows_in_scoring"] == 32  # calib_data is split: half calibrates
    source = records_source.load("tiny", tiny_project)
    assert in_sample(BuildFacts(calibration_origin="calib.npz"), source) == {
        "in_sample": "32 of the scoring rows are calibration rows"
    }
    assert in_sample(BuildFacts(), source) == {}  # an uncalibrated variant is still held out
    metrics = {"onnx_int8_static": metric(1.0, in_sample="32 of the scoring rows are calibration rows")}
    [warning] = [w for w in traps(metrics, Cpu(), Choice(status="none", chosen="none")) if "in-sample" in w]
    assert "`onnx_int8_static`" in warning and "32 of the scoring rows" in warning
    assert rows(metrics, ["onnx_int8_static"], "onnx_fp32")[0][-1] == "ok (in-sample)"


def test_a_fallback_predicts_the_validation_rows_outputs_with_the_source_only_when_it_asks(tiny_project):
    """The export saves validation inputs and labels; BuildContext.validation runs the source on them,
    as the export runs it on the scoring rows (most builds never tune, so most runs never pay)."""
    from pipeline.optimize.passes.base import BuildContext
    from pipeline.prepare.sources import load_source

    exported(tiny_project)
    config = tiny_config()
    rows = BuildContext("tiny", config, tiny_project, tiny_project / "out").validation()
    assert rows.labels is not None and set(rows.outputs) == {"output"}
    source = load_source("tiny", config, tiny_project)
    assert np.allclose(rows.outputs["output"], source.predict(rows.inputs)["output"], atol=1e-6)
