"""DVC stage: build one variant of one model (see pipeline.build.stage)."""

import sys

from pipeline.build.stage import build_variant
from pipeline.stage_runner import run_stage

if __name__ == "__main__":
    sys.exit(run_stage(build_variant, ["model", "variant"], shared_lock=True))
