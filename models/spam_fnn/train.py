"""Train spam_fnn on a seeded synthetic binary task (200 features, like the article's input)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from models.common import datasets, torch_train
from models.spam_fnn.net import build


def train(settings: dict[str, Any], out_dir: Path) -> dict[str, Any]:
    splits = datasets.spam_like(settings["seed"], settings["samples"])
    torch.manual_seed(settings["seed"])
    module = build()
    losses = torch_train.fit(module, splits.train, torch.nn.BCELoss(), settings, binary=True)
    torch.save(module.state_dict(), out_dir / "weights.pt")
    splits.save(out_dir, "features")
    return {
        "train_loss": losses[-1],
        "train_accuracy": torch_train.accuracy(module, splits.train, binary=True),
        "eval_accuracy": torch_train.accuracy(module, splits.eval, binary=True),
        "train_samples": len(splits.train.y),
        "calib_samples": len(splits.calib.y),
        "eval_samples": len(splits.eval.y),
    }
