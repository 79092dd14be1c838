"""The typed records every stage hands the next, one module per file kind; each is written and read
through its own module only.

- source: the export's record of a source model (artifacts/<model>/source/source.json)
- build: a variant's build, with the runtime config it loads with (artifacts/<model>/<variant>/build.json)
- code_entry: the entry file of a code-plus-weights artifact (torch_model.json, jax_model.json)
- engine: the entry file of a TensorRT engine artifact (engine.json)
- measured: what the bench worker measures; variant: one variant's outcome (reports/details)
- metrics: the numbers DVC diffs (reports/metrics)
- profile: where a variant's time goes (reports/profile)
- choice: the select stage's decision (reports/selection)
- manifest: a deployment's description (deploy/<model>/manifest.json)
- env: the machine the figures belong to (reports/env.json)

The variant record's API is re-exported here: `records.load(model)`, `records.VariantRecord`.
"""

from pipeline.core.outcome import Kind, Status
from pipeline.core.records.base import Part
from pipeline.core.records.choice import Choice, load_choice, parse_choice, write_choice
from pipeline.core.records.env import load_env, machine_name
from pipeline.core.records.measured import (
    Accuracy,
    EdgeRows,
    EvalRows,
    Generation,
    Interval,
    LatencyStats,
    Measured,
    OutputFidelity,
    Perplexity,
    RuntimeSettings,
    SampleRateInterval,
    Screen,
    Stability,
    Throughput,
)
from pipeline.core.records.metrics import Metrics, read_metrics
from pipeline.core.records.variant import Records, VariantRecord, load, parse, write

__all__ = [
    "Accuracy",
    "Choice",
    "EdgeRows",
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
    "RuntimeSettings",
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
