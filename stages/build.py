"""DVC stage: build one variant of one model (see pipeline.optimize.stage)."""

import sys

from pipeline.optimize.stage import build_variant
from pipeline.stage_runner import run_stage

if __name__ == "__main__":
    sys.exit(run_stage(build_variant, ["model", "variant"], shared_lock=True))
