"""The build stage: one variant of one model, written atomically to artifacts/<model>/<variant>/.

The pass runs in a fresh process (pipeline.isolate). Whatever happens, the folder ends up with a
build.json saying ok / skipped / failed and why, so the bench stage can record the outcome and one
failing variant never stops the others.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pipeline import layout, variants
from pipeline.config import PARAMS_FILE, Params, load_params
from pipeline.files import atomic_dir, read_json, remove, write_json
from pipeline.isolate import IsolatedFailure, call
from pipeline.passes.base import BuildContext


def write_variant_plan(params: Params, root: Path = Path(".")) -> dict[str, Any]:
    """One file per variant with its `variants.<name>` params. Build stages depend on these files
    instead of declaring the params: DVC parses params.yaml once per stage that declares any, which
    for 64 build stages cost about a second of every no-op `dvc repro`. Unchanged content keeps the
    same hash, so a knob change still rebuilds only its own variant."""
    with atomic_dir(layout.variant_plan_dir(root)) as tmp:
        for name, section in params.variants.items():
            write_json(tmp / f"{name}.json", section or {})
    return {"status": "ok", "reason": f"{len(params.variants)} variants"}


def run_pass(model: str, variant: str, out_dir: str, root: str = ".") -> dict[str, Any]:
    """Child-process side: run the variant's pass into `out_dir`; return entry and details."""
    params = load_params(Path(root) / PARAMS_FILE)
    spec = variants.get(variant)
    config = variants.validate_variant_params(variant, params.variant_params(variant, model))
    ctx = BuildContext(model, params.model(model), Path(root), Path(out_dir))
    start = time.perf_counter()
    result = spec.pass_class()().run(ctx, config)
    if not (ctx.out_dir / result.entry).exists():
        raise RuntimeError(f"pass {spec.pass_ref} did not write its entry {result.entry}")
    return {
        "entry": result.entry,
        "runtime_config": result.runtime_config,
        "build": {"seconds": time.perf_counter() - start, **result.details},
    }


def build_variant(model: str, variant: str, params: Params, root: Path = Path(".")) -> dict[str, Any]:
    """Build one variant; returns build.json's content (also written into the variant folder)."""
    spec = variants.get(variant)
    params.variant_params(variant)  # a variant in the matrix must be configured
    config = params.model(model)
    info: dict[str, Any] = {
        "status": "ok",
        "reason": "",
        "variant": variant,
        "runtime": spec.runtime,
        "precision": spec.precision,
        "entry": "",
        "runtime_config": {},
        "build": {},
    }
    export = read_json(layout.source_dir(model, root) / layout.SOURCE_INFO)["export"]
    with atomic_dir(layout.variant_dir(model, variant, root)) as tmp:
        reason = variants.skip_reason(spec, model, config)
        if reason:
            info |= {"status": "skipped", "reason": reason}
        elif spec.needs_export and export["status"] != "ok":
            info |= {"status": "failed", "reason": f"no ONNX export: {export['reason']}"}
        else:
            try:
                info |= call(
                    "pipeline.build:run_pass",
                    {"model": model, "variant": variant, "out_dir": str(tmp), "root": str(root)},
                    timeout=params.build.timeout_s,
                )
            except IsolatedFailure as failure:
                for leftover in tmp.iterdir():
                    remove(leftover)
                if failure.not_applicable:
                    info |= {"status": "skipped", "reason": str(failure)}
                else:
                    info |= {"status": "failed", "reason": f"build failed: {failure}"}
        write_json(tmp / layout.BUILD_INFO, info)
    return info
