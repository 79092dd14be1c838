"""DVC stage: benchmark one built variant in a fresh process (see pipeline.measure.stage), holding
the machine lock exclusively while it measures."""

import sys

from pipeline.measure.stage import benchmark_variant
from pipeline.stage_runner import run_stage

if __name__ == "__main__":
    sys.exit(run_stage(benchmark_variant, ["model", "variant"]))
