"""DVC stage: build one variant of one model (see pipeline.build)."""

import sys

from pipeline.build import build_variant
from pipeline.stage_runner import run_stage

if __name__ == "__main__":
    sys.exit(run_stage(build_variant, ["model", "variant", "machine?"], shared_lock=True))
