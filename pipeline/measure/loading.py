"""A built variant loaded into its runtime, with what the load took: where every benchmark of it starts
(the bench worker, the generation bench, the select stage's contest)."""

from __future__ import annotations

import importlib
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import psutil

from pipeline import runtimes
from pipeline.core import layout
from pipeline.core.config import PARAMS_FILE, Params, load_params
from pipeline.core.data import DataSet
from pipeline.core.memory import RssSampler
from pipeline.core.records import build as build_record
from pipeline.core.registry import RUNTIMES
from pipeline.runtimes.base import Session
from pipeline.runtimes.layout import in_layout


@dataclass
class Loaded:
    """A variant loaded by its runtime, with what it took to get there."""

    session: Session
    reference: DataSet
    params: Params
    import_ms: float
    runtime_rss_mb: float
    load_ms: float
    target: str = "cpu"
    root: Path = Path(".")
    edges: DataSet | None = None  # a tree ensemble's split-threshold rows (layout.EDGES), where the export made them


def load_variant(model: str, artifact: Path, root: Path, sampler: RssSampler | None = None) -> Loaded:
    """Load the variant built in folder `artifact` (pipeline.core.layout.built_dir) for `model`."""
    params = load_params(root / PARAMS_FILE)
    threads = params.bench.resolved_threads()
    build = build_record.load(artifact)
    target = build.target
    reference = DataSet.load(layout.source_dir(model, root) / layout.REFERENCE)

    start = time.perf_counter()
    adapter = importlib.import_module(RUNTIMES[build.runtime].module)
    import_ms = 1000 * (time.perf_counter() - start)
    runtime_rss_mb = psutil.Process().memory_info().rss / 1e6

    config = runtimes.typed(adapter, build.runtime_config)
    start = time.perf_counter()
    with sampler.phase("load") if sampler else nullcontext():
        session = in_layout(adapter.load(artifact / build.entry, threads, config, target), config)
    load_ms = 1000 * (time.perf_counter() - start)
    edges = layout.source_dir(model, root) / layout.EDGES
    return Loaded(session, reference, params, import_ms, runtime_rss_mb, load_ms, target, root,
                  DataSet.load(edges) if edges.exists() else None)  # fmt: skip
