"""onnxruntime-genai: the builder's ONNX decoder run by its Generator (C++ loop, a KV-cache buffer
shared between past and present), greedy. The quality pass runs the same model.onnx in a plain
ONNX Runtime session with an empty past."""

from __future__ import annotations

import json
import time
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime_genai as og

from pipeline.runtimes import base
from pipeline.runtimes.generator import Generation, Generator

NUMPY_TYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(bfloat16)": np.float32}


Config = base.Config  # no load settings of its own


class Details(base.Details):
    """What its sessions report (Session.details); None in a record written before the key was."""

    threads: int | None = None
    onnxruntime_genai: str | None = None  # its version
    provider: str | None = None


class GenaiGenerator(Generator):
    def __init__(self, folder: Path, threads: int) -> None:
        self.folder, self.threads = folder, threads
        config = og.Config(str(folder))
        options = {"intra_op_num_threads": threads, "inter_op_num_threads": 1}
        config.overlay(json.dumps({"model": {"decoder": {"session_options": options}}}))
        self.model = og.Model(config)
        self._session: Any = None

    def generate(self, prompt: np.ndarray, new_tokens: int) -> Generation:
        params = og.GeneratorParams(self.model)
        total = prompt.shape[1] + new_tokens
        params.set_search_options(max_length=total, min_length=total, do_sample=False, batch_size=len(prompt))
        generator = og.Generator(self.model, params)
        start = time.perf_counter()
        generator.append_tokens(prompt)
        generator.generate_next_token()
        tokens = [generator.get_next_tokens().copy()]
        first_s, steps = time.perf_counter() - start, []
        for _ in range(new_tokens - 1):
            start = time.perf_counter()
            generator.generate_next_token()
            tokens.append(generator.get_next_tokens().copy())
            steps.append(time.perf_counter() - start)
        return Generation(np.stack(tokens, 1), first_s, steps)

    def logits(self, ids: np.ndarray) -> np.ndarray:
        import onnxruntime as ort

        if self._session is None:
            options = ort.SessionOptions()
            options.intra_op_num_threads = self.threads
            self._session = ort.InferenceSession(str(self.folder / self.decoder["filename"]), options)
        feed: dict[str, np.ndarray] = {
            "input_ids": ids[None].astype(np.int64),
            "attention_mask": np.ones((1, len(ids)), np.int64),
        }
        for port in self._session.get_inputs():
            if port.name.startswith("past_key_values"):
                shape = (1, self.decoder["num_key_value_heads"], 0, self.decoder["head_size"])
                feed[port.name] = np.zeros(shape, NUMPY_TYPES.get(port.type, np.float32))
        return self._session.run(["logits"], feed)[0][0].astype(np.float32)

    @cached_property
    def decoder(self) -> dict[str, Any]:
        return json.loads((self.folder / "genai_config.json").read_text())["model"]["decoder"]

    def details(self) -> dict[str, Any]:
        return Details.model_validate(
            {"threads": self.threads, "onnxruntime_genai": og.__version__, "provider": "cpu"}
        ).as_dict()


def load(artifact: Path, threads: int, config: Config, target: str = "cpu") -> GenaiGenerator:
    return GenaiGenerator(artifact, threads)
