"""The typed records every stage hands the next, one module per file kind; each is written and read
through its own module only.

- variant: one variant's outcome and measurements (reports/details), the metrics DVC diffs (reports/metrics)
- choice: the select stage's decision (reports/selection)

The variant record's API is re-exported here: `records.load(model)`, `records.VariantRecord`.
"""

from pipeline.core.outcome import Kind, Status
from pipeline.core.records.base import Part
from pipeline.core.records.choice import Choice, load_choice, parse_choice, write_choice
from pipeline.core.records.env import load_env, machine_name
from pipeline.core.records.variant import (
    Accuracy,
    EvalRows,
    Generation,
    Interval,
    LatencyStats,
    Measured,
    Metrics,
    OutputFidelity,
    Perplexity,
    Records,
    SampleRateInterval,
    Screen,
    Stability,
    Throughput,
    VariantRecord,
    load,
    parse,
    read_metrics,
    write,
)

__all__ = [
    "Accuracy",
    "Choice",
    "EvalRows",
    "Generation",
    "Interval",
    "Kind",
    "LatencyStats",
    "Measured",
    "Metrics",
    "OutputFidelity",
    "Part",
    "Perplexity",
    "Records",
    "SampleRateInterval",
    "Screen",
    "Stability",
    "Status",
    "Throughput",
    "VariantRecord",
    "load",
    "load_choice",
    "load_env",
    "machine_name",
    "parse",
    "parse_choice",
    "read_metrics",
    "write",
    "write_choice",
]
