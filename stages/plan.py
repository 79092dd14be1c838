"""DVC stage: each variant's params and code hash as its own file (see pipeline.build.plan)."""

import sys

from pipeline.build.plan import write_plan
from pipeline.stage_runner import run_stage

if __name__ == "__main__":
    sys.exit(run_stage(write_plan, []))
