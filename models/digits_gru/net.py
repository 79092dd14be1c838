"""A GRU classifier that reads scikit-learn's 8x8 digits row by row: the recurrent case.

Input N x seq x 8 (rows of pixels in time order; the sequence axis is dynamic), ten logits out,
from the last hidden state. Recurrent nets are the other family users bring to CPU inference, and
the one whose ONNX graph (one GRU op looping over time) runtimes and quantizers handle least alike.
"""

from __future__ import annotations

import torch
from torch import nn


class DigitsGRU(nn.Module):
    def __init__(self, hidden: int = 64) -> None:
        super().__init__()
        self.gru = nn.GRU(input_size=8, hidden_size=hidden, batch_first=True)
        self.head = nn.Linear(hidden, 10)

    def forward(self, rows: torch.Tensor) -> torch.Tensor:
        _, last = self.gru(rows)
        return self.head(last[0])


def build() -> DigitsGRU:
    return DigitsGRU()
