"""DVC stage: build one variant of one model (see pipeline.optimize.stage)."""

import sys

from pipeline.optimize.stage import build_variant
from pipeline.stage_runner import run_stage


def build(model, variant, params):
    """Build one variant; the stage's line says how its build ended."""
    record = build_variant(model, variant, params)
    return {"status": record.status, "reason": record.reason}


if __name__ == "__main__":
    sys.exit(run_stage(build, ["model", "variant"], shared_lock=True))
