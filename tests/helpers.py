"""Synthetic metrics for the selection, gate and report tests; functions the isolation tests run in a
child process."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.core.errors import ModelFileError
from pipeline.core.records import Choice, Kind, Records, VariantRecord

if TYPE_CHECKING:
    from pipeline.core.config import Params

# Pipeline runs in the slow tests (test_e2e, test_machines): benchmarks and contests in a fraction
# of a second each; the figures are asserted on for their shape, not their precision.
FAST_BENCH = {
    "threads": 1,
    "warmup": {"iters": 5, "seconds": 0.05},
    "latency": {"min_blocks": 6, "min_seconds": 0.1, "max_seconds": 1.0, "block_seconds": 0.02},
    "throughput": {"batches": [1, 16], "seconds": 0.1, "concurrent_seconds": 0.1},
}
FAST_CONTEST = {"block_seconds": 0.02, "min_rounds": 4, "min_seconds": 0, "max_rounds": 20, "max_seconds": 4}


def add(a: int, b: int) -> int:
    return a + b


def raise_value_error() -> None:
    raise ValueError("bad things\nhappened here")


def raise_user_error() -> None:
    raise ModelFileError("m.onnx: not a valid ONNX model")


def not_applicable() -> None:
    from pipeline.core.errors import NotApplicable

    raise NotApplicable("torchax does not import with this torch")


def die() -> None:
    print("about to crash", flush=True, file=__import__("sys").stderr)
    os.kill(os.getpid(), signal.SIGKILL)


def sleep(seconds: float) -> None:
    time.sleep(seconds)


def metric(
    p50: float, delta: float | None = 0.0, size: float = 1.0, runtime: str = "onnxruntime", peak: float | None = None,
    rss: float = 100.0, noise: float = 1.0, status: str = "ok", value: float = 0.9, precision: str = "fp32",
    cosine: float | None = 0.9999, recall: float | None = None, **fields: Any,
) -> VariantRecord:  # fmt: skip
    """One variant's record as the bench stage writes it (reports/details/<model>/<variant>.json), built by
    the same typed model: a field renamed there fails here. `fields` sets any other field (device, kind...)."""
    peak = peak if peak is not None else 1000.0 / p50
    if status != "ok":
        kind = fields.pop("kind", Kind.FAILED if status == "failed" else Kind.UNAVAILABLE)
        reason = fields.pop("reason", "it broke")
        return VariantRecord(status=status, kind=kind, reason=reason, runtime=runtime, precision=precision, **fields)
    data = {
        "status": "ok", "kind": "ok", "reason": "", "runtime": runtime, "precision": precision,
        "device": "cpu", "threads": 2, "size_mb": size, "load_ms": 5.0, "first_infer_ms": 1.0,
        "latency_ms": {"p50": p50, "p90": p50 * 1.2, "p99": p50 * 1.5, "mean": p50, "std": 0.0, "n": 1000},
        "p50_ci_pct": noise, "noisy": noise > 2,
        "p50_ci_ms": {"low": p50 * (1 - noise / 100), "high": p50 * (1 + noise / 100), "blocks": 10},
        "throughput_sps": {"peak": peak, "peak_batch": 8, "by_batch": {"b1": 1000.0 / p50, "b8": peak}},
        "peak_rss_mb": rss + 50.0, "footprint_mb": rss, "cpu_util_pct": {"latency": 100.0, "sweep": 150.0},
        "accuracy": {"metric": "accuracy", "value": value, "delta": delta} if delta is not None
        else {"metric": "none", "value": None, "delta": None},
        **({"fidelity": {"y": {"cosine_mean": cosine, "cosine_min": cosine, "rel_l2": 1 - cosine, "max_abs_diff": 0.1,
                               "max_rel_diff": 0.01, "values_per_row": 10, "top1_agreement": None,
                               "neighbour_recall": recall}}}
           if cosine is not None else {}),
    }  # fmt: skip
    return VariantRecord.model_validate(data | fields)


def record_choice(model: str, params: Params, root: Path) -> Choice:
    """The select step's record for the synthetic figures under `root` (the screen alone: there are no
    artifacts to re-measure), written where the report and the gate read it."""
    from pipeline.core import records
    from pipeline.decide.choice import choice_record
    from pipeline.decide.contest import decide

    contest = params.select.contest.model_copy(update={"enabled": False})
    screen_only = params.model_copy(update={"select": params.select.model_copy(update={"contest": contest})})
    found: Records = records.load(model, root)
    choice = choice_record(model, decide(model, found, screen_only, root), found, screen_only)
    records.write_choice(model, choice, root)
    return choice


def write_source(root: Path, model: str = "tiny", **fields: Any) -> None:
    """A source.json for `model` under `root`, as the export writes it: ok, with `fields` over the defaults."""
    from pipeline.core import layout
    from pipeline.core.records import source

    folder = layout.source_dir(model, root)
    folder.mkdir(parents=True, exist_ok=True)
    record = {"model": model, "status": "ok", "output_names": ["output"], "export": {"status": "ok"}} | fields
    source.write(source.SourceRecord.model_validate(record), folder)


def write_build(artifact: Path, **fields: Any) -> None:
    """A build.json in variant folder `artifact`: an ok ONNX Runtime build unless `fields` say otherwise."""
    from pipeline.core.records import build

    record = {"status": "ok", "kind": "ok", "variant": artifact.name, "runtime": "onnxruntime", "precision": "fp32"}
    build.write(build.BuildRecord.model_validate(record | fields), artifact)


ABORTING_NET = '''"""A model that dies natively (abort(): SIGABRT, as std::bad_alloc's end does) on some batches."""
import os

import torch


class Aborting(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(12, 3)

    def forward(self, x):
        if {condition}:
            os.abort()
        return self.linear(x)


def build():
    return Aborting()
'''


def aborting_net(folder: Path, condition: str) -> Path:
    """folder/net.py with build(): a linear model whose forward aborts the process where `condition` (of the
    input x) holds."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "net.py").write_text(ABORTING_NET.replace("{condition}", condition))
    return folder / "net.py"
