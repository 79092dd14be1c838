"""DVC stage: resolve the bench settings for this machine (see pipeline.measure.stage.write_bench_plan)."""

import sys

from pipeline.measure.stage import write_bench_plan
from pipeline.stage_runner import run_stage

if __name__ == "__main__":
    sys.exit(run_stage(write_bench_plan, []))
