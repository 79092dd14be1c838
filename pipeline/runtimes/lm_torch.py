"""transformers in PyTorch: the source decoder's own forward pass, its DynamicCache carried from step to step."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import AutoModelForCausalLM

from pipeline.runtimes import base
from pipeline.runtimes.generator import Generation, Generator

Config = base.Config  # no load settings of its own


class Details(base.Details):
    """What its sessions report (Session.details); None in a record written before the key was."""

    threads: int | None = None
    attention: str | None = None


class TorchGenerator(Generator):
    def __init__(self, folder: Path, threads: int) -> None:
        torch.set_num_threads(threads)
        self.model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, local_files_only=True).eval()

    @torch.inference_mode()
    def generate(self, prompt: np.ndarray, new_tokens: int) -> Generation:
        start = time.perf_counter()
        out = self.model(input_ids=torch.from_numpy(prompt), use_cache=True)
        token = out.logits[:, -1].argmax(-1, keepdim=True)
        tokens, steps = [token], []
        first_s = time.perf_counter() - start
        for _ in range(new_tokens - 1):
            start = time.perf_counter()
            out = self.model(input_ids=token, past_key_values=out.past_key_values, use_cache=True)
            token = out.logits[:, -1].argmax(-1, keepdim=True)
            steps.append(time.perf_counter() - start)
            tokens.append(token)
        return Generation(torch.cat(tokens, 1).numpy(), first_s, steps)

    @torch.inference_mode()
    def logits(self, ids: np.ndarray) -> np.ndarray:
        return self.model(input_ids=torch.from_numpy(ids[None])).logits[0].float().numpy()

    def details(self) -> dict[str, Any]:
        return Details.model_validate(
            {"threads": torch.get_num_threads(), "attention": self.model.config._attn_implementation}
        ).as_dict()


def load(artifact: Path, threads: int, config: Config, target: str = "cpu") -> TorchGenerator:
    return TorchGenerator(artifact, threads)
