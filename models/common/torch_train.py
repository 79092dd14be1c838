"""A plain, seeded PyTorch training loop for the zoo's small models."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from models.common.datasets import Split


def fit(
    module: torch.nn.Module, data: Split, loss_fn: torch.nn.Module, settings: dict[str, Any], binary: bool = False
) -> list[float]:
    """Adam over shuffled mini-batches; one thread so the weights do not depend on the core count."""
    torch.manual_seed(settings["seed"])
    torch.set_num_threads(1)
    x, y = torch.from_numpy(data.x), torch.from_numpy(data.y)
    if binary:  # BCELoss wants float targets shaped like the (N, 1) probabilities
        y = y.float().unsqueeze(1)
    optimizer = torch.optim.Adam(module.parameters(), lr=settings["lr"], weight_decay=settings.get("weight_decay", 0.0))
    generator = torch.Generator().manual_seed(settings["seed"])
    losses = []
    module.train()
    for _ in range(settings["epochs"]):
        order = torch.randperm(len(x), generator=generator)
        total = 0.0
        for start in range(0, len(x), settings["batch_size"]):
            index = order[start : start + settings["batch_size"]]
            optimizer.zero_grad()
            loss = loss_fn(module(x[index]), y[index])
            loss.backward()
            optimizer.step()
            total += loss.item() * len(index)
        losses.append(total / len(x))
    return losses


def accuracy(module: torch.nn.Module, data: Split, binary: bool = False) -> float:
    module.eval()
    with torch.inference_mode():
        out = module(torch.from_numpy(data.x)).numpy()
    predicted = (out[:, 0] > 0.5).astype(np.int64) if binary else out.argmax(axis=1)
    return float(np.mean(predicted == data.y.reshape(-1).astype(np.int64)))
