"""The export stage: freeze what every variant of a model is built from and compared with.

Writes artifacts/<model>/source/ atomically:
  model.onnx      the ONNX export (or the user's ONNX file), checked and parity-tested
  reference.npz   eval inputs, the FP32 source's outputs on them, and labels when known
  calib.npz       calibration inputs for static quantization
  source.json     spec, digests and the export check, read by the build and bench stages
and reports/export/<model>.json, the export check as a DVC metric.
A failed ONNX export is recorded, not raised: native variants (torch_eager, ...) still run.
"""

from __future__ import annotations

import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

from pipeline import layout
from pipeline.config import Params, model_dir
from pipeline.data import DataSet, batches, concat, generate_inputs, load_user_data
from pipeline.errors import first_line
from pipeline.evaluate import task_metric
from pipeline.files import atomic_dir, tree_digest, write_json
from pipeline.sources import load_source
from pipeline.sources.base import SourceModel

PREDICT_BATCH = 256
# Timings go to the export metrics only: source.json stays byte-identical when the export is,
# so rerunning the export does not rebuild every variant.
TIMINGS = {"export_s", "source_load_s", "source_predict_ms_per_sample"}


def eval_set(name: str, params: Params, root: Path) -> DataSet:
    config = params.model(name)
    if config.eval_data:
        data = load_user_data(model_dir(name, root) / config.eval_data, config.inputs, f"catalog.{name}.eval_data")
        return data.head(params.export.max_eval_samples)
    n = params.export.generated_samples
    inputs = generate_inputs(config.inputs, n, params.export.seed)
    return DataSet(inputs, origin=f"generated from the input spec ({n} samples, seed {params.export.seed})")


def calibration_set(name: str, params: Params, root: Path, evaluation: DataSet) -> DataSet:
    """Calibration inputs: the catalog's calib_data, else the eval inputs (recorded as such)."""
    config = params.model(name)
    if config.calib_data:
        data = load_user_data(model_dir(name, root) / config.calib_data, config.inputs, f"catalog.{name}.calib_data")
        return DataSet(data.inputs, origin=data.origin)
    return DataSet(evaluation.inputs, origin=f"eval inputs ({evaluation.origin}); no calib_data given")


def predict_all(source: SourceModel, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return concat([source.predict(chunk) for chunk in batches(inputs, PREDICT_BATCH)])


def check_onnx(path: Path, reference: DataSet, atol: float, rtol: float) -> dict[str, Any]:
    """onnx.checker (full) plus numerical parity of ONNX Runtime against the source's outputs."""
    import onnx
    import onnxruntime as ort

    onnx.checker.check_model(str(path), full_check=True)
    model = onnx.load(str(path), load_external_data=False)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = list(reference.outputs)
    outputs = concat(
        [dict(zip(names, session.run(names, chunk), strict=True)) for chunk in batches(reference.inputs, PREDICT_BATCH)]
    )
    worst, passed = 0.0, True
    for name, expected in reference.outputs.items():
        got = outputs[name].astype(np.float64)
        want = expected.astype(np.float64)
        worst = max(worst, float(np.abs(got - want).max(initial=0.0)))
        passed &= bool(np.allclose(got, want, atol=atol, rtol=rtol))
    return {
        "checker": "ok",
        "opset": max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0),
        "nodes": len(model.graph.node),
        "parity_max_abs_diff": worst,
        "parity_atol": atol,
        "parity_rtol": rtol,
        "parity": "ok" if passed else "failed",
    }


def export_model(name: str, params: Params, root: Path = Path(".")) -> dict[str, Any]:
    """Run the export stage for one model; returns the export report (also written to reports/)."""
    config = params.model(name)
    folder = model_dir(name, root)
    evaluation = eval_set(name, params, root)
    calibration = calibration_set(name, params, root, evaluation)
    start = time.perf_counter()
    source = load_source(name, config, root)
    load_s = time.perf_counter() - start
    start = time.perf_counter()
    evaluation.outputs = predict_all(source, evaluation.inputs)
    reference_s = time.perf_counter() - start
    source_metric = task_metric(config.metric, next(iter(evaluation.outputs.values())), evaluation.labels)
    report: dict[str, Any] = {
        "status": "ok",
        "reason": "",
        "source": config.source,
        "source_metric": {"metric": config.metric, "value": source_metric},
        "eval_samples": len(evaluation),
        "calib_samples": len(calibration),
        "source_load_s": load_s,
        "source_predict_ms_per_sample": 1000 * reference_s / len(evaluation),
    }
    with atomic_dir(layout.source_dir(name, root)) as tmp:
        evaluation.save(tmp / layout.REFERENCE)
        calibration.save(tmp / layout.CALIBRATION)
        onnx_path = tmp / layout.EXPORTED_ONNX
        try:
            report |= source.export_onnx(onnx_path, params.export)
            report |= check_onnx(onnx_path, evaluation, params.export.atol, params.export.rtol)
            if report["parity"] != "ok":
                report["status"] = "failed"
                report["reason"] = (
                    f"ONNX output differs from the source: max abs diff {report['parity_max_abs_diff']:.3g} "
                    f"exceeds atol {params.export.atol:g} + rtol {params.export.rtol:g} (export.atol/rtol)"
                )
        except Exception as error:  # a converter failure is a result to record, not a crash
            traceback.print_exc()
            report |= {
                "status": "failed",
                "reason": f"ONNX export failed: {type(error).__name__}: {first_line(error)}",
            }
        if report["status"] != "ok" and onnx_path.exists():
            onnx_path.unlink()
        write_json(
            tmp / layout.SOURCE_INFO,
            {
                "model": name,
                "config": config.model_dump(mode="json"),
                "output_names": source.output_names,
                "model_digest": tree_digest(folder),  # any change to the model's folder rebuilds its variants
                "eval_origin": evaluation.origin,
                "calib_origin": calibration.origin,
                "export": {k: v for k, v in report.items() if k not in TIMINGS},
            },
        )
    write_json(layout.export_report(name, root), report)
    return report
