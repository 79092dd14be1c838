"""The export stage: freeze what every variant of a model is built from and compared with.

Writes artifacts/<model>/source/ atomically:
  model.onnx      the ONNX export (or the user's ONNX file), checked and parity-tested
                  (+ model.onnx.data when the weights live in a side file)
  reference.npz   scoring rows: inputs, the FP32 source's outputs on them, labels when known
  edges.npz       a tree ensemble's rows on its split thresholds, with the source's outputs (SourceModel.edge_rows)
  calib.npz       calibration rows for static quantization
  validation.npz  rows a fallback tunes on (inputs, labels; it predicts the source's outputs); never scoring rows
  source.json     spec, dims, batching, digests and the export check, read by build and bench
and reports/export/<model>.json, the export check as a DVC metric.

Nothing here stops `dvc repro` for the other models: a failed ONNX export is recorded (native
variants still run), and a source that cannot even be loaded writes a failed source.json that
every variant of the model then reports, with the reason.
"""

from __future__ import annotations

import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.core import layout, onnx_files
from pipeline.core.config import PARAMS_FILE, ExportConfig, InputSpec, ModelConfig, Params
from pipeline.core.data import Arrays, DataSet, run_batched, sample_batch
from pipeline.core.errors import ConfigError, NotApplicable, PipelineError, first_line
from pipeline.core.evaluate import Judging
from pipeline.core.files import atomic_dir, tree_digest, write_json
from pipeline.core.inputs import (
    declared_bounds,
    dims_of,
    outputs_rows_first,
    to_model_layout,
)
from pipeline.core.isolate import IsolatedFailure, Usage, call
from pipeline.core.layout import model_dir
from pipeline.core.memory import ProbeLog, batch_limit, batch_size
from pipeline.core.records import source as source_record
from pipeline.core.records.source import SourceRecord
from pipeline.core.registry import SOURCES
from pipeline.core.task_metrics import resolve
from pipeline.prepare.decoder import export_decoder
from pipeline.prepare.family import model_family
from pipeline.prepare.held_out import held_out_record, held_out_sets, user_eval_set
from pipeline.prepare.sources import load_source
from pipeline.prepare.sources.base import SourceModel

PREDICT_BATCH = 256  # at most; memory decides below that
# Timings go to the export metrics only: source.json stays byte-identical when the export is,
# so rerunning the export does not rebuild every variant.
TIMINGS = {"export_s", "export_process_s", "export_peak_mb", "source_load_s", "source_predict_ms_per_sample",
           "export_stage_s"}  # fmt: skip


def resolve_dims(name: str, config: ModelConfig, evaluation: DataSet | None) -> dict[str, int]:
    """Values of the symbolic dimensions: the catalog's `dims`, else the eval data's sizes."""
    found = dims_of(evaluation.inputs, config.inputs) if evaluation else {}
    for dim, value in config.dims.items():
        if dim in found and found[dim] != value:
            raise ConfigError(
                f"{PARAMS_FILE}: catalog.{name}.dims.{dim}: {value} declared, the eval data has {found[dim]} "
                f"({config.eval_data}); drop the value to take the data's"
            )
    return found | dict(config.dims)


def with_token_ranges(config: ModelConfig, evaluation: DataSet | None) -> ModelConfig:
    """Token id inputs with no declared `high` take the eval data's range (its largest id + 1): the
    rows hold real ids, so generated ones (the export's probe, the dimension sweep) stay within the
    vocabulary even when the model exposes no `config.vocab_size`."""
    if evaluation is None:
        return config
    inputs = {
        name: spec.model_copy(update={"high": float(evaluation.inputs[name].max()) + 1})
        if spec.kind == "token_ids" and spec.high is None and evaluation.inputs[name].size
        else spec
        for name, spec in config.inputs.items()
    }
    return config.model_copy(update={"inputs": inputs})


def token_vocab(config: ModelConfig) -> int | None:
    """The largest token id range the spec declares (what the bench's generated inputs may use)."""
    highs = [int(spec.high) for spec in config.inputs.values() if spec.kind == "token_ids" and spec.high is not None]
    return min(highs) if highs else None


def token_bounds(name: str, config: ModelConfig, source: SourceModel) -> dict[str, int]:
    """Each token input's vocabulary (ids must lie in [0, bound)): the catalog's `high`, else the
    model config's `vocab_size` (`type_vocab_size` for token_type_ids). Recorded in source.json for
    the deploy manifest, so that predict refuses ids an embedding would silently misread; inputs
    with neither are left out (an eval-derived `high` is no bound: the vocabulary may be larger).
    `config` is the catalog's entry as written."""
    found = {"token_ids": source.vocab_size, "token_type_ids": source.type_vocab_size}
    bounds = declared_bounds(config.inputs)
    for input_name, spec in config.inputs.items():
        vocab = found.get(spec.kind)
        if vocab is None:
            continue
        declared = bounds.get(input_name)
        if declared is not None and declared > vocab:
            raise ConfigError(
                f"{PARAMS_FILE}: catalog.{name}.inputs.{input_name}.high: {declared} exceeds the model's own "
                f"vocabulary of {vocab} (its config): ids past it would be misread, not refused"
            )
        bounds[input_name] = vocab if declared is None else declared
    return bounds


def check_onnx(
    path: Path,
    reference: DataSet,
    atol: float,
    rtol: float,
    batch: int = PREDICT_BATCH,
    fixed: bool = False,
    same_graph: bool = False,
    specs: dict[str, InputSpec] | None = None,
    output_axes: dict[str, int] | None = None,
) -> dict[str, Any]:
    """onnx.checker (full, by path: external weights included) plus numerical parity of ONNX Runtime
    against the source's outputs. A `same_graph` export (an ONNX source copied as it is) made those
    outputs itself, in ONNX Runtime: running it again would compare a graph with itself (10 s of a
    ResNet-50's 256 rows at batch 1), so parity holds by construction and says so. `specs` and
    `output_axes` give a model not rows first its own layout (pipeline.runtimes.layout)."""
    import onnx
    import onnxruntime as ort

    onnx.checker.check_model(str(path), full_check=True)
    model = onnx.load(str(path), load_external_data=False)
    facts = {
        "checker": "ok",
        "opset": max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0),
        "nodes": len(model.graph.node),
        "external_data": onnx_files.uses_external_data(path),
    }
    if same_graph:
        return facts | {"parity": "ok", "parity_how": "by construction: the source's own ONNX graph, copied"}
    session = ort.InferenceSession(str(path), onnx_files.session_options(), providers=["CPUExecutionProvider"])
    names = list(reference.outputs)

    def run(chunk: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        outputs = session.run(names, to_model_layout(chunk, specs or {}))
        return outputs_rows_first(dict(zip(names, outputs, strict=True)), output_axes or {})

    outputs = run_batched(run, reference.inputs, batch, fixed)
    worst, passed, texts = 0.0, True, {}
    for name, expected in reference.outputs.items():
        if expected.dtype.kind in "OSU":  # text: equal or not, row by row
            same = (outputs[name].astype(str) == expected.astype(str)).reshape(len(expected), -1).all(axis=1)
            texts[name] = int((~same).sum())
            passed &= bool(same.all())
            continue
        got = outputs[name].astype(np.float64)
        want = expected.astype(np.float64)
        worst = max(worst, float(np.abs(got - want).max(initial=0.0)))
        passed &= bool(np.allclose(got, want, atol=atol, rtol=rtol))
    return facts | {
        "parity_how": f"ONNX Runtime on every scoring row, batch {batch}",
        "parity_max_abs_diff": worst,
        "parity_atol": atol,
        "parity_rtol": rtol,
        "parity": "ok" if passed else "failed",
        **({"parity_text_rows_differ": texts} if texts else {}),
    }


def parity_failure(report: dict[str, Any], rows: int) -> str:
    """Why the export's outputs are not the source's: text rows that differ (no tolerance), else the largest
    numerical difference against export.atol/rtol."""
    if differ := {name: n for name, n in report.get("parity_text_rows_differ", {}).items() if n}:
        named = ", ".join(f"{name} on {n} of {rows} rows" for name, n in differ.items())
        return f"ONNX output's text differs from the source's ({named}; text is compared by equality)"
    return (
        f"ONNX output differs from the source: max abs diff {report['parity_max_abs_diff']:.3g} "
        f"exceeds atol {report['parity_atol']:g} + rtol {report['parity_rtol']:g} (export.atol/rtol)"
    )


def export_model(name: str, params: Params, root: Path = Path(".")) -> dict[str, Any]:
    """Run the export stage for one model; returns the export report (also written to reports/).

    The work runs in a child process (pipeline.core.isolate), for it runs the user's model: a native
    abort there (std::bad_alloc, SIGSEGV, SIGABRT) kills that process, not the stage. One that dies while
    the batch probe runs a batch is a finding: the export runs again with its batches capped at the
    largest that ran. Dying anywhere else fails this model alone, with the signal, as a Python error does,
    and `dvc repro` goes on to the other models."""
    with tempfile.TemporaryDirectory(prefix="export-") as scratch:
        probes, cap = Path(scratch) / "batch_probe.json", None
        while True:
            try:
                return call(
                    "pipeline.prepare.export:export_here",
                    {
                        "name": name,
                        "params": params.model_dump(mode="json"),
                        "root": str(root),
                        "probes": str(probes),
                        "cap": cap,
                    },
                    timeout=EXPORT_TIMEOUTS * params.build.timeout_s,
                )
            except IsolatedFailure as failure:
                died = ProbeLog.died_at(probes)
                if cap is None and failure.signal and died and died[1]:
                    cap = {"largest": died[1], "because": f"batch {died[0]} killed the process ({failure.signal})"}
                    continue
                where = f" while the batch probe ran batch {died[0]}" if died else ""
                return _failed(name, params, root, f"the export's process died{where}: {failure}")


EXPORT_TIMEOUTS = 3  # build.timeout_s each: the converter's own (isolated again), then loading and predicting


def export_here(
    name: str, params: dict[str, Any], root: str, probes: str, cap: dict[str, Any] | None
) -> dict[str, Any]:
    """The child-process side of export_model: the export, a Python error in it recorded as the model's failure."""
    settings = Params.model_validate(params)
    try:
        if settings.model(name).generates:
            return export_decoder(name, settings, Path(root))
        return _export(name, settings, Path(root), Path(probes), cap)
    except PipelineError as error:  # the model's own files or spec: this model fails, the others go on
        reason = str(error)
    except Exception as error:
        traceback.print_exc()
        reason = f"loading the source failed: {type(error).__name__}: {first_line(error)}"
    return _failed(name, settings, Path(root), reason)


def _failed(name: str, params: Params, root: Path, reason: str) -> dict[str, Any]:
    """A failed source record, which every variant of the model then reports, and the export report."""
    report = {"status": "failed", "reason": reason, "source": params.model(name).source}
    with atomic_dir(layout.source_dir(name, root)) as tmp:
        source_record.write(SourceRecord(model=name, status="failed", reason=reason, export=report), tmp)
    write_json(layout.export_report(name, root), report)
    return report


def export_onnx_file(
    model: str, config: dict[str, Any], export: dict[str, Any], out: str, dims: dict[str, int], root: str = "."
) -> dict[str, Any]:
    """Child-process side of the export: load the source and write its ONNX file to `out`.

    Converters can take many times a model's size (tf2onnx on VGG19 goes past 20 GB), so the
    conversion runs alone in its own process, memory-watched (pipeline.core.isolate), before this
    stage loads the source for its reference outputs; its memory is returned when it ends."""
    source = load_source(model, ModelConfig.model_validate(config), Path(root), dims)
    return source.export_onnx(Path(out), ExportConfig.model_validate(export))


def _export(name: str, params: Params, root: Path, probes: Path, cap: dict[str, Any] | None) -> dict[str, Any]:
    began = time.perf_counter()
    config = params.model(name)
    folder = model_dir(name, root)
    evaluation = user_eval_set(name, params, root)
    dims = resolve_dims(name, config, evaluation)
    config = with_token_ranges(config, evaluation)
    with atomic_dir(layout.source_dir(name, root)) as tmp:
        onnx_path = tmp / layout.EXPORTED_ONNX
        start, usage = time.perf_counter(), Usage()
        try:
            exported = call(
                "pipeline.prepare.export:export_onnx_file",
                {
                    "model": name,
                    "config": config.model_dump(mode="json"),
                    "export": params.export.model_dump(mode="json"),
                    "out": str(onnx_path),
                    "dims": dims,
                    "root": str(root),
                },
                timeout=params.build.timeout_s,
                env=dict(SOURCES[config.source].converter_env) or None,
                usage=usage,
            )
            export_failure, export_skip = "", None
        except IsolatedFailure as failure:  # a converter that does not apply (NotApplicable) is a skip, not a failure
            exported, export_skip = {}, failure.skip_kind
            export_failure = f"no ONNX export: {failure}" if export_skip else f"ONNX export failed: {failure}"
        exported["export_process_s"] = time.perf_counter() - start
        exported["export_peak_mb"] = round(usage.peak_mb, 1)  # the converter's process tree
        start = time.perf_counter()
        source = load_source(name, config, root, dims)  # a model that cannot load fails here, alone
        load_s = time.perf_counter() - start
        check_output_names(name, config, source.output_names)
        bounds = token_bounds(name, params.model(name), source)
        sets = held_out_sets(name, params, root, evaluation, source, bounds)
        evaluation, calibration, validation = sets["scoring"], sets["calibration"], sets["validation"]
        fixed = config.fixed_batch
        batching = batch_limit(
            lambda n: source.predict(sample_batch(evaluation.inputs, n)),
            params.export.memory_budget_mb,
            fixed,
            **({"largest": cap["largest"], "capped_because": cap["because"]} if cap else {}),
            log=probes,
        )
        batch = batch_size(PREDICT_BATCH, batching.max_batch, fixed)
        start = time.perf_counter()
        evaluation.outputs = run_batched(source.predict, evaluation.inputs, batch, fixed is not None)
        reference_s = time.perf_counter() - start  # validation's outputs: only a fallback needs them
        if (edges := source.edge_rows(evaluation)) is not None:
            edges.outputs = run_batched(source.predict, edges.inputs, batch, fixed is not None)
            edges.save(tmp / layout.EDGES)
        producers = onnx_files.file_producers(onnx_path)  # what tells a sigmoid's [0, 1] from a Linear layer's
        metric = resolve(config.metric, name, root)  # a metric that cannot load or run fails the model here
        source_metric = metric(evaluation.outputs, evaluation.targets) if metric and evaluation.targets else None
        report: dict[str, Any] = {
            "status": "ok",
            "reason": "",
            "source": config.source,
            "source_metric": {"metric": config.metric, "value": source_metric},
            "eval_samples": len(evaluation),
            "calib_samples": len(calibration),
            "held_out": held_out_record(sets),
            "dims": dims,
            "fixed_batch": fixed,
            "max_batch": batching.max_batch,
            "source_load_s": load_s,
            "source_predict_ms_per_sample": 1000 * reference_s / len(evaluation),
            **exported,
            **({"rescues": source.rescues} if source.rescues else {}),
            **({"full_integer": source.full_integer} if source.full_integer else {}),
            "readings": readings_of(config, evaluation.outputs, producers),
            **({"producers": producers} if producers else {}),
            **({"edge_rows": edges.origin} if edges is not None else {}),
        }
        evaluation.save(tmp / layout.REFERENCE)
        calibration.save(tmp / layout.CALIBRATION)
        validation.save(tmp / layout.VALIDATION)
        fixed = report["fixed_batch"]  # the exporter's, when it proved an ONNX file's batch relaxable
        try:
            if export_skip:
                raise NotApplicable(export_failure)
            if export_failure:
                raise PipelineError(export_failure)
            report |= check_onnx(
                onnx_path,
                evaluation,
                params.export.atol,
                params.export.rtol,
                batch,
                fixed is not None,
                same_graph=report.pop("same_graph", False),
                specs=config.inputs,
                output_axes=source.output_batch_axes,
            )
            if report["parity"] != "ok":
                report["status"] = "failed"
                report["reason"] = parity_failure(report, len(evaluation))
        except Exception as error:  # a converter failure is a result to record, not a crash
            if not isinstance(error, PipelineError):
                traceback.print_exc()
            report |= {"status": "skipped" if isinstance(error, NotApplicable) else "failed",
                       "reason": str(error) if isinstance(error, PipelineError) else
                       f"ONNX check failed: {type(error).__name__}: {first_line(error)}"}  # fmt: skip
        if report["status"] != "ok":
            for leftover in tmp.glob(layout.EXPORTED_ONNX + "*"):
                leftover.unlink()
        declared = {k: v for k in ("num_heads", "hidden_size") if (v := getattr(config, k)) is not None}
        shapes = {name: spec.model_shape(fixed or 1, dims) for name, spec in config.inputs.items()}
        family = model_family(onnx_path, config.model_type, source.attention | declared, shapes)
        report["family"] = family.model_dump(mode="json", exclude_none=True)
        source_record.write(
            SourceRecord(
                model=name,
                status="ok",
                config=config,
                inputs=_effective_inputs(config, fixed),
                output_names=source.output_names,
                output_batch_axes=source.output_batch_axes,
                dims=dims,
                fixed_batch=fixed,
                vocab_size=source.vocab_size or token_vocab(config),
                token_bounds=bounds,
                batching=batching,
                model_digest=tree_digest(folder),  # any change to the model's folder rebuilds its variants
                eval_origin=evaluation.origin,
                calib_origin=calibration.origin,
                held_out=report["held_out"],
                family=family,
                export={k: v for k, v in report.items() if k not in TIMINGS},
            ),
            tmp,
        )
    report["export_stage_s"] = time.perf_counter() - began  # the reference outputs and checks included
    write_json(layout.export_report(name, root), report)
    return report


def readings_of(config: ModelConfig, outputs: Arrays, producers: dict[str, str]) -> dict[str, dict[str, str]]:
    """Each output's reading on the scoring rows and how it was found (pipeline.core.readings.detect): what
    its variants are judged by."""
    judging = Judging.of(config, producers)
    found = (judging.kind(i, name, values) for i, (name, values) in enumerate(outputs.items()))
    return {name: {"reading": kind, "how": how} for name, (kind, how) in zip(outputs, found, strict=True)}


def check_output_names(name: str, config: ModelConfig, outputs: list[str]) -> None:
    """Every output the entry judges by name (`judged_as`, `decision_threshold`) is one the model has."""
    for field in ("judged_as", "decision_threshold"):
        if unknown := sorted(set(getattr(config, field)) - set(outputs)):
            raise ConfigError(
                f"{PARAMS_FILE}: catalog.{name}.{field}: no output {unknown[0]!r} (outputs: {', '.join(outputs)})"
            )


def source_outputs(name: str, config: ModelConfig, root: Path, source_info: SourceRecord, inputs: Arrays) -> Arrays:
    """The FP32 source's outputs on `inputs`, predicted as the export predicts the scoring rows'. The
    export saves the validation rows without them: only a fallback tunes on them, and it asks here
    (BuildContext.validation) in the rare build that runs."""
    source = load_source(name, config, root, source_info.dims)
    fixed = config.fixed_batch  # the source's own batch (the export may have relaxed the ONNX file's)
    batch = batch_size(PREDICT_BATCH, source_info.batching.max_batch, fixed)
    return run_batched(source.predict, inputs, batch, fixed is not None)


def _effective_inputs(config: ModelConfig, fixed: int | None) -> dict[str, InputSpec]:
    """The input spec the artifacts accept: the catalog's, with a batch axis made dynamic if it was."""
    if fixed is not None or config.fixed_batch is None:
        return config.inputs
    return {name: spec.model_copy(update={"shape": ["batch", *spec.shape[1:]]}) for name, spec in config.inputs.items()}
