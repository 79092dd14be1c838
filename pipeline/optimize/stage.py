"""The build stage: one variant of one model, written atomically to artifacts/<model>/<variant>/.

Whether it is built at all is pipeline.optimize.applicability's answer (why_not_built), asked before
any process starts. The pass runs in a fresh process (pipeline.core.isolate). Whatever happens, the
folder ends up with a build.json saying ok / skipped / failed and why, so the bench stage can record
the outcome and one failing variant never stops the others.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pipeline.core import layout, onnx_files, rescues
from pipeline.core import registry as variants
from pipeline.core.config import PARAMS_FILE, Params, load_params
from pipeline.core.errors import NotApplicable, one_line
from pipeline.core.files import atomic_dir, remove
from pipeline.core.isolate import IsolatedFailure, call
from pipeline.core.records import Kind
from pipeline.core.records import build as build_record
from pipeline.core.records import source as source_record
from pipeline.core.records.build import BuildRecord
from pipeline.core.records.env import Probe
from pipeline.core.targets import target_for
from pipeline.machine.probe import recorded_probe
from pipeline.optimize import knobs
from pipeline.optimize.applicability import why_not_built
from pipeline.optimize.passes.base import BuildContext


def run_pass(
    model: str, variant: str, out_dir: str, root: str = ".", target: str = "cpu", crashed: str = ""
) -> dict[str, Any]:
    """Child-process side: run the variant's pass into `out_dir` for `target`; return entry and details.
    `crashed`: how a first try died by a signal (rescue crash_conservative_runtime): the artifact then
    loads with its runtime's conservative setting, here and wherever it runs."""
    params = load_params(Path(root) / PARAMS_FILE)
    spec = variants.get(variant)
    config = knobs.variant_config(params, variant, model)
    ctx = BuildContext(model, params.model(model), Path(root), Path(out_dir), target, variant)
    start = time.perf_counter()
    result = knobs.pass_class(spec)().run(ctx, config)
    result.runtime_config |= dict(spec.runtime_options) | ctx.layout
    if crashed:
        rescue = rescues.BY_NAME["crash_conservative_runtime"]
        setting = rescues.CONSERVATIVE[spec.runtime]
        result.runtime_config |= setting
        seen = f"the first build's {crashed}"
        result.rescues.append(rescue.record(seen, setting=setting))
    seconds = time.perf_counter() - start
    if not (ctx.out_dir / result.entry).exists():
        raise RuntimeError(f"pass {spec.pass_ref} did not write its entry {result.entry}")
    quantized = quantized_in(ctx.out_dir / result.entry, spec.precision)
    return {
        "entry": result.entry,
        "runtime_config": result.runtime_config,
        "build": {"seconds": seconds, **result.details, **({"rescues": result.rescues} if result.rescues else {}),
                  **quantized, "load_check": prove_loadable(ctx, spec.runtime, result)},
    }  # fmt: skip


def quantized_in(entry: Path, precision: str) -> dict[str, Any]:
    """An integer variant's ONNX artifact read for what it is: the quantized operators it holds
    (`quantized_ops`); none at all is not applicable (the float model under an INT8 name: weights a
    quantizer did not see), never an INT8 record."""
    if precision not in ("int8", "int4") or entry.suffix != ".onnx":
        return {}
    found = onnx_files.quantized_ops(entry)
    if not found:
        kinds = ", ".join(sorted(onnx_files.QUANTIZED_OPS))
        raise NotApplicable(
            f"nothing was quantized: the built graph holds no quantized operator ({kinds}); its weights are "
            "where the quantizer does not look, or its operators are not ones it quantizes"
        )
    return {"quantized_ops": dict(found)}


def prove_loadable(ctx: BuildContext, runtime: str, result: Any) -> str:
    """Load the artifact with its own runtime and run one batch: a build that its runtime refuses
    (an FP16 graph with a mistyped Cast, say) is a failed build, never an ok one."""
    from pipeline.runtimes import load

    example = ctx.example()
    try:
        config = result.runtime_config | {"code_root": str(ctx.root)}
        session = load(runtime, ctx.out_dir / result.entry, 1, config, ctx.target)
        outputs = session.run(example)
    except Exception as error:
        raise RuntimeError(
            f"the built artifact does not run in {runtime}: {type(error).__name__}: {one_line(error)}"
        ) from None
    missing = set(ctx.source_info.output_names) - set(outputs)
    if missing:
        raise RuntimeError(f"the built artifact runs in {runtime} but lacks outputs {sorted(missing)}")
    rows = len(next(iter(example.values())))
    return f"ok: loaded by {runtime} and ran a batch of {rows}"


def isolated_build(model: str, variant: str, tmp: Path, root: Path, target: str, timeout: float) -> dict[str, Any]:
    """The pass in a child process: its result, or the skip or failure it ended in. A child killed by
    a signal (CRASH_SIGNALS: a kernel chosen for this CPU class) is built once more with its runtime's
    conservative setting (rescues.CONSERVATIVE); the failure then says whether that ran too."""
    runtime = variants.get(variant).runtime
    command = f"python stages/build.py {model} {variant}"
    kwargs = {"model": model, "variant": variant, "out_dir": str(tmp), "root": str(root), "target": target}
    first: IsolatedFailure | None = None
    while True:
        try:
            return call(
                "pipeline.optimize.stage:run_pass", kwargs, timeout, log=layout.log_file(model, variant, "build", root)
            )
        except IsolatedFailure as failure:
            for leftover in tmp.iterdir():
                remove(leftover)
            if failure.skip_kind:
                return {"status": "skipped", "kind": Kind(failure.skip_kind), "reason": str(failure)}
            crashed = failure.signal in rescues.CRASH_SIGNALS and runtime in rescues.CONSERVATIVE
            if first is None and crashed:
                first, kwargs = failure, kwargs | {"crashed": str(failure)}
                continue
            reason = f"build failed: {(first or failure).evidence(command)}"
            if first is not None:
                setting = ", ".join(f"{k}={v}" for k, v in rescues.CONSERVATIVE[runtime].items())
                reason += f"; built again with {runtime}'s conservative setting ({setting}): {failure}"
            elif failure.signal in rescues.CRASH_SIGNALS:
                reason += f"; {runtime} has no conservative setting to build again with (rescues.CONSERVATIVE)"
            return {"status": "failed", "kind": Kind.FAILED, "reason": reason}


def build_variant(model: str, variant: str, params: Params, root: Path = Path(".")) -> BuildRecord:
    """Build one variant; returns its build record (also written into the variant folder as build.json)."""
    spec = variants.get(variant)
    knob_values = knobs.variant_config(params, variant, model)  # configured, valid: else one line, before any build
    the_pass = knobs.pass_class(spec)()
    target = target_for(spec.device, params.targets)
    probe = recorded_probe(target, root) if target else Probe(available=False, reason="not probed (reports/env.json)")
    record = BuildRecord(
        status="ok",
        kind=Kind.OK,
        variant=variant,
        runtime=spec.runtime,
        precision=spec.precision,
        target=target or spec.device,
        per_target=spec.per_target,
    )
    source = source_record.load(model, root)
    with atomic_dir(layout.variant_dir(model, variant, root)) as tmp:
        skip = why_not_built(spec, model, params, the_pass, knob_values, source, probe, root)
        if skip:
            ended = {"status": "skipped", "kind": skip.kind, "reason": skip.reason}
        elif not source.ok:
            ended = {"status": "failed", "kind": Kind.FAILED, "reason": f"the source model failed: {source.reason}"}
        elif (
            spec.needs_export
            and source.export.status != "ok"
            and the_pass.reads_export(knob_values, params.model(model).source)
        ):
            ended = {"status": "failed", "kind": Kind.FAILED, "reason": f"no ONNX export: {source.export.reason}"}
            # a converter that does not apply to this model: its reason is the variant's skip
            if source.export.status == "skipped":
                ended = {"status": "skipped", "kind": Kind.NOT_APPLICABLE, "reason": source.export.reason}
        else:
            ended = isolated_build(model, variant, tmp, root, target, params.build.timeout_s)
        record = BuildRecord.model_validate(record.model_dump() | ended)
        build_record.write(record, tmp)
    return record
