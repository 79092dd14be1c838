"""DVC stage: benchmark one built variant in a fresh process (see pipeline.measure.stage), holding
the machine lock exclusively while it measures."""

import sys

from pipeline.measure.stage import benchmark_variant
from pipeline.stage_runner import run_stage


def bench(model, variant, params):
    """Benchmark one built variant; the stage's line says its record's kind, finer than its status."""
    record = benchmark_variant(model, variant, params)
    return {"status": record.kind.value, "reason": record.reason}


if __name__ == "__main__":
    sys.exit(run_stage(bench, ["model", "variant"]))
