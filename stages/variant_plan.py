"""DVC stage: each variant's params as its own file (see pipeline.build.write_variant_plan)."""

import sys

from pipeline.build import write_variant_plan
from pipeline.stage_runner import run_stage

if __name__ == "__main__":
    sys.exit(run_stage(write_variant_plan, []))
