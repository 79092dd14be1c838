"""serving/model_analyzer.yaml: a Triton Model Analyzer `profile` config (triton-model-analyzer's
docs/config.md schema) whose search space is centred on what the pipeline measured, for users who have
a Triton to tune on. The config.pbtxt written beside it is the starting point; what only a real server
under real load can tell (queue delay, instances beyond the measured ones) is searched here.

Run from serving/: `model-analyzer profile -f model_analyzer.yaml`.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from tritonclient.grpc import model_config_pb2 as mc

from pipeline.core.files import write_text
from pipeline.core.records.manifest import Manifest
from pipeline.serve.repositories import measured

FILE = "model_analyzer.yaml"


def _doubling(top: int) -> list[int]:
    """1, 2, 4, ... up to and including `top`."""
    values = [1]
    while values[-1] * 2 <= top:
        values.append(values[-1] * 2)
    return sorted({*values, top})


def analyzer_config(manifest: Manifest, config: mc.ModelConfig) -> tuple[dict, list[str]]:
    """The profile config and the comment lines naming where each range comes from."""
    found = measured.concurrency(manifest)
    instances = config.instance_group[0].count
    counts = _doubling(2 * instances)
    model: dict = {
        "cpu_only": True,
        "parameters": {"concurrency": _doubling(4 * found.requests), "batch_sizes": [1]},
        "model_config_parameters": {"instance_group": [{"kind": "KIND_CPU", "count": counts}]},
    }
    notes = [
        f"Triton Model Analyzer profile config for {manifest.model} (variant {manifest.variant}, measured on "
        f"{manifest.machine}); run from serving/: model-analyzer profile -f {FILE}",
        f"instance_group count {counts}: around the {instances} written (the concurrent measurement ran {found.text})",
        f"concurrency up to 4 x the {found.requests} requests measured in flight",
    ]
    if config.max_batch_size > 0:
        model["parameters"]["batch_sizes"] = sorted({1, config.max_batch_size})
        model["model_config_parameters"]["max_batch_size"] = [config.max_batch_size]
        notes.append(f"batch_sizes 1 and {config.max_batch_size}: the throughput sweep's ends")
    if config.HasField("dynamic_batching"):
        p50 = measured.queue_delay_us(manifest)
        delays = sorted({0, max(1, p50 // 2), p50, 2 * p50})
        model["model_config_parameters"]["dynamic_batching"] = {"max_queue_delay_microseconds": delays}
        notes.append(
            f"max_queue_delay_microseconds {delays}: 0 (as written) to twice the batch-1 p50 ({p50} us): whether "
            "waiting for a batch pays depends on the arrival rate, which only your load shows"
        )
    search = {
        "model_repository": "triton",
        "run_config_search_disable": True,  # the ranges below, not Model Analyzer's automatic search
        "profile_models": {manifest.model: model},
    }
    return search, notes


def write_analyzer(manifest: Manifest, config: mc.ModelConfig, serving: Path) -> str:
    search, notes = analyzer_config(manifest, config)
    write_text(serving / FILE, "".join(f"# {line}\n" for line in notes) + yaml.safe_dump(search, sort_keys=False))
    return FILE
