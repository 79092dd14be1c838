"""The plan stage: one file per variant (reports/plan/<variant>.json) holding what its builds and
benchmarks depend on beyond the model: its params (its `*variants.<name>` section and every model's
overrides of it) and a hash of its pass's and runtime's code.

Build and bench stages depend on their variant's file instead of on params.yaml and on every pass
and runtime module: DVC parses params.yaml once per stage that declares params (64 build stages
made a no-op `dvc repro` a second slower), and a shared dependency on pipeline/build/passes would
rebuild every variant for an edit to one pass. An unchanged file keeps its hash, so a change to one
variant's knobs or code reruns only that variant's stages.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.core import layout, registry
from pipeline.core.config import Params
from pipeline.core.files import atomic_dir, write_json
from pipeline.core.imports import code_hash, walk


def variant_code(variant: str, root: Path = Path(".")) -> list[Path]:
    """The project files a variant's pass and runtime adapter run (the registry names them by string)."""
    spec = registry.get(variant)
    return walk([spec.pass_ref.partition(":")[0], registry.RUNTIMES[spec.runtime].module], root)


def write_plan(params: Params, root: Path = Path(".")) -> dict[str, Any]:
    with atomic_dir(layout.plan_dir(root)) as tmp:
        for name, section in params.all_variants.items():
            overrides = {m: c.overrides[name] for m, c in params.catalog.items() if name in c.overrides}
            write_json(
                tmp / f"{name}.json",
                {"params": section or {}, "overrides": overrides, "code": code_hash(variant_code(name, root), root)},
            )
    return {"status": "ok", "reason": f"{len(params.all_variants)} variants"}
