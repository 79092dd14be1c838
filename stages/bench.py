"""DVC stage: benchmark one built variant in a fresh process (see pipeline.benchmark)."""

import sys

from pipeline.benchmark import benchmark_variant
from pipeline.cli import run_stage

if __name__ == "__main__":
    sys.exit(run_stage(benchmark_variant, ["model", "variant"]))
