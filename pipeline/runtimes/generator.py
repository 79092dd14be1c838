"""The interface of text-generation runtimes: a decoder with its KV cache, decoding greedily.

`generate` times what a user waits for: the prompt in and the first new token out (time to first
token), then each further token (time per output token). `logits` is one fresh pass over a whole
window, for the quality figures. `prepare` and `run` make a generator usable where a Session is
(the select stage's side-by-side contest times a short generation; the build's load check runs
`run`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from pipeline.core.data import Arrays

CONTEST_PROMPT, CONTEST_TOKENS = 16, 16  # one contest call: a 16-token reply to a 16-token prompt


@dataclass
class Generation:
    tokens: np.ndarray  # [batch, new tokens]
    first_s: float  # prompt in, first new token out
    step_s: list[float]  # each further token


class Generator(ABC):
    @abstractmethod
    def generate(self, prompt: np.ndarray, new_tokens: int) -> Generation:
        """Greedy decoding of exactly `new_tokens` after `prompt` ([batch, length] token ids)."""

    @abstractmethod
    def logits(self, ids: np.ndarray) -> np.ndarray:
        """[length, vocab] logits of one fresh pass over `ids` ([length] token ids)."""

    def details(self) -> dict[str, Any]:
        return {}

    def prepare(self, inputs: Arrays) -> Callable[[], Generation]:
        prompt = np.ascontiguousarray(inputs["input_ids"][:, :CONTEST_PROMPT])
        return lambda: self.generate(prompt, CONTEST_TOKENS)

    def run(self, inputs: Arrays) -> Arrays:
        return {"logits": np.stack([self.logits(row) for row in inputs["input_ids"]])}
