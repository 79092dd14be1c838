"""Train digits_cnn on scikit-learn's bundled handwritten digits (real data, fixed splits)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from models.common import datasets, torch_train
from models.digits_cnn.net import build


def train(settings: dict[str, Any], out_dir: Path) -> dict[str, Any]:
    splits = datasets.digits(settings["seed"], layout="nchw")
    torch.manual_seed(settings["seed"])
    module = build()
    losses = torch_train.fit(module, splits.train, torch.nn.CrossEntropyLoss(), settings)
    torch.save(module.state_dict(), out_dir / "weights.pt")
    splits.save(out_dir, "image")
    return {
        "train_loss": losses[-1],
        "train_accuracy": torch_train.accuracy(module, splits.train),
        "eval_accuracy": torch_train.accuracy(module, splits.eval),
        "train_samples": len(splits.train.y),
        "calib_samples": len(splits.calib.y),
        "eval_samples": len(splits.eval.y),
    }
