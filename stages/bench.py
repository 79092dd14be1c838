"""DVC stage: benchmark one built variant in a fresh process (see pipeline.bench.stage), holding
the machine lock exclusively while it measures."""

import sys

from pipeline.bench.stage import benchmark_variant
from pipeline.stage_runner import run_stage

if __name__ == "__main__":
    sys.exit(run_stage(benchmark_variant, ["machine", "model", "variant"]))
