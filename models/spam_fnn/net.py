"""The source article's spam classifier: 200-128-64-32-16-8-1, ReLU, sigmoid output."""

from __future__ import annotations

from itertools import pairwise

import torch
from torch import nn

WIDTHS = (200, 128, 64, 32, 16, 8, 1)


class SpamFNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        for i, (width_in, width_out) in enumerate(pairwise(WIDTHS)):
            layers.append(nn.Linear(width_in, width_out))
            layers.append(nn.ReLU() if i < len(WIDTHS) - 2 else nn.Sigmoid())
        self.layers = nn.Sequential(*layers)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.layers(features)


def build() -> SpamFNN:
    return SpamFNN()
