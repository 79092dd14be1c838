"""openvino-genai: the stateful IR run by LLMPipeline, greedy. A streamer stamps each new token on
the same clock the other runtimes are timed with (LLMPipeline's own perf_metrics are kept in the
details). The quality pass compiles the same IR in OpenVINO directly (a fresh
state per window). The build's `inference_precision` and `kv_cache_precision` are passed as the
CPU plugin's hints ('auto': the plugin's own choice), and the precisions it used are reported."""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from typing import Any

import numpy as np
import openvino as ov
import openvino_genai as ov_genai

from pipeline.core import layout
from pipeline.runtimes import base
from pipeline.runtimes.generator import Generation, Generator


class Config(base.Config):
    """What the openvino-genai adapter reads of its build's runtime_config (beside layout and code_root)."""

    inference_precision: str | None = None  # the CPU plugin's INFERENCE_PRECISION_HINT ("auto": the plugin's)
    kv_cache_precision: str | None = None


class Details(base.Details):
    """What its sessions report (Session.details); None in a record written before the key was."""

    openvino_genai: str | None = None  # its version
    properties: dict[str, str | int | bool] | None = None  # the OpenVINO properties openvino-genai was given
    prefix_caching: bool | None = None
    plugin_chose: dict[str, str] | None = None  # OpenVINO property -> what the CPU plugin chose (auto precisions)


def properties(threads: int, config: Config) -> dict[str, Any]:
    props: dict[str, Any] = {"INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY"}
    if config.inference_precision not in (None, "auto"):
        props["INFERENCE_PRECISION_HINT"] = config.inference_precision
    if config.kv_cache_precision not in (None, "auto"):
        props["KV_CACHE_PRECISION"] = config.kv_cache_precision
    return props


class Stamps(ov_genai.StreamerBase):
    """The time each new token (or, at batch > 1, each step's tokens) reached the streamer."""

    def __init__(self) -> None:
        super().__init__()
        self.times: list[float] = []

    def write(self, token: Any) -> ov_genai.StreamingStatus:
        self.times.append(time.perf_counter())
        return ov_genai.StreamingStatus.RUNNING

    def end(self) -> None:
        pass


class OpenVinoGenerator(Generator):
    def __init__(self, folder: Path, threads: int, config: Config) -> None:
        self.folder, self.props = folder, properties(threads, config)
        # no prefix caching: a repeated prompt would skip its prefill and time a cache hit, not the model
        scheduler = ov_genai.SchedulerConfig()
        scheduler.enable_prefix_caching = False
        self.pipeline = ov_genai.LLMPipeline(str(folder), "CPU", self.props | {"scheduler_config": scheduler})
        self._compiled: Any = None

    def generate(self, prompt: np.ndarray, new_tokens: int) -> Generation:
        config = ov_genai.GenerationConfig()
        config.max_new_tokens = config.min_new_tokens = new_tokens
        config.ignore_eos = True
        inputs = ov_genai.TokenizedInputs(ov.Tensor(prompt.astype(np.int64)), ov.Tensor(np.ones_like(prompt)))
        stamps = Stamps() if len(prompt) == 1 else None  # LLMPipeline streams at batch 1 only
        start = time.perf_counter()
        result = self.pipeline.generate(inputs, config, stamps)
        if stamps is None:  # batch > 1: the first token from LLMPipeline's own clock, no per-token times
            return Generation(np.array(result.tokens, dtype=np.int64), result.perf_metrics.get_ttft().mean / 1e3, [])
        times = [start, *stamps.times]
        steps = [b - a for a, b in itertools.pairwise(times[1:])]
        return Generation(np.array(result.tokens, dtype=np.int64), times[1] - start, steps)

    @property
    def compiled(self) -> ov.CompiledModel:
        if self._compiled is None:
            self._compiled = ov.Core().compile_model(str(self.folder / layout.OV_GENAI_MODEL), "CPU", self.props)
        return self._compiled

    def logits(self, ids: np.ndarray) -> np.ndarray:
        request = self.compiled.create_infer_request()
        feed = {
            "input_ids": ids[None].astype(np.int64),
            "attention_mask": np.ones((1, len(ids)), np.int64),
            "position_ids": np.arange(len(ids), dtype=np.int64)[None],
            "beam_idx": np.zeros(1, np.int32),
        }
        return np.array(request.infer(feed)["logits"][0], dtype=np.float32)

    def details(self) -> dict[str, Any]:
        compiled = self.compiled
        used = {
            key: compiled.get_property(key).to_string() for key in ("INFERENCE_PRECISION_HINT", "KV_CACHE_PRECISION")
        }
        executed = f"{used['INFERENCE_PRECISION_HINT']} (KV cache {used['KV_CACHE_PRECISION']})"
        return Details(
            openvino_genai=ov_genai.__version__, properties=self.props, prefix_caching=False, plugin_chose=used,
            inference_precision=executed,  # what the plugin computed in: bench.honest_precision reads it
        ).as_dict()  # fmt: skip


def load(artifact: Path, threads: int, config: Config, target: str = "cpu") -> OpenVinoGenerator:
    return OpenVinoGenerator(artifact, threads, config)
