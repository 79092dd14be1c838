"""The rows each role gets, disjoint: `scoring` (what every variant is measured on), `calibration`
(static INT8) and `validation` (what a fallback tunes on), from the user's eval and calib data or
generated from the input spec; and their record in source.json (counts, origins, shared rows)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.core.config import PARAMS_FILE, ModelConfig, Params
from pipeline.core.data import DataSet, generate_inputs, rows_in
from pipeline.core.inputs import check_input_values, load_user_data
from pipeline.core.layout import model_dir
from pipeline.prepare.sources.base import SourceModel


def user_eval_set(name: str, params: Params, root: Path) -> DataSet | None:
    config = params.model(name)
    if not config.eval_data:
        return None
    data = load_user_data(model_dir(name, root) / config.eval_data, config.inputs, f"catalog.{name}.eval_data")
    return data.head(params.export.max_eval_samples)


def generated_set(config: ModelConfig, source: SourceModel, n: int, seed: int, role: str) -> DataSet:
    inputs = generate_inputs(config.inputs, n, seed, source.dims, source.vocab_size, source.field)
    return DataSet(inputs, origin=f"{role} inputs generated from the input spec ({n} samples, seed {seed})")


def held_out_sets(
    name: str, params: Params, root: Path, evaluation: DataSet | None, source: SourceModel, bounds: dict[str, int]
) -> dict[str, DataSet]:
    """The three disjoint roles of input rows: `calibration` (static INT8), `validation` (what
    accuracy control tunes on) and `scoring` (what every variant is measured on).

    With calib_data, its rows are split between calibration and validation (in export.split's
    proportions, seeded: never the same rows) and every eval row scores. With eval data
    alone, the eval rows are split (export.split, seeded). Without either, each role is generated
    from the spec with its own seed.

    Every row is checked against the token `bounds` (check_input_values) where it is born: a Gather
    that clamps an id would corrupt every variant's figures without failing."""
    config = params.model(name)
    if evaluation is None:
        n, seed = params.export.generated_samples, params.export.seed
        sets = {
            role: generated_set(config, source, n, seed + offset, role)
            for offset, role in enumerate(("scoring", "calibration", "validation"))
        }
        for data in sets.values():
            check_input_values(data.inputs, config.inputs, data.origin, bounds)
        return sets
    # loaded before the source (its dims come from it) against the declared bounds: now the model's too
    what = f"{evaluation.origin} ({PARAMS_FILE}: catalog.{name}.eval_data)"
    check_input_values(evaluation.inputs, config.inputs, what, bounds)
    if config.calib_data:
        calib = model_dir(name, root) / config.calib_data
        data = load_user_data(calib, config.inputs, f"catalog.{name}.calib_data", bounds)
        split = params.export.split
        share = split.validation / (split.calibration + split.validation)
        parts = data.split({"validation": share}, params.export.seed)
        return {"scoring": evaluation, "calibration": parts["rest"], "validation": parts["validation"]}
    split = params.export.split
    parts = evaluation.split({"calibration": split.calibration, "validation": split.validation}, params.export.seed)
    return {"scoring": parts.pop("rest"), **parts}


def held_out_record(sets: dict[str, DataSet]) -> dict[str, Any]:
    """Counts and origins of each role, and how many scoring rows the others share (0 unless the
    user's calib_data repeats eval rows: then the report marks the figures in-sample)."""
    scoring = sets["scoring"]
    return {
        role: {"rows": len(data), "origin": data.origin}
        | ({} if role == "scoring" else {"rows_in_scoring": rows_in(scoring.inputs, data.inputs)})
        for role, data in sets.items()
    }
