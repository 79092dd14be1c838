"""Train digits_gru on scikit-learn's bundled digits, each image a sequence of 8 rows of 8 pixels."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from models.common import datasets, torch_train
from models.common.datasets import Split, Splits
from models.digits_gru.net import build


def as_rows(splits: Splits) -> Splits:
    """N x 8 x 8 x 1 images -> N x 8 x 8 sequences (rows in time order)."""
    return Splits(*(Split(s.x[..., 0], s.y) for s in (splits.train, splits.calib, splits.eval)))


def train(settings: dict[str, Any], out_dir: Path) -> dict[str, Any]:
    splits = as_rows(datasets.digits(settings["seed"], layout="nhwc"))
    torch.manual_seed(settings["seed"])
    module = build()
    losses = torch_train.fit(module, splits.train, torch.nn.CrossEntropyLoss(), settings)
    torch.save(module.state_dict(), out_dir / "weights.pt")
    splits.save(out_dir, "rows")
    return {
        "train_loss": losses[-1],
        "train_accuracy": torch_train.accuracy(module, splits.train),
        "eval_accuracy": torch_train.accuracy(module, splits.eval),
        "train_samples": len(splits.train.y),
        "calib_samples": len(splits.calib.y),
        "eval_samples": len(splits.eval.y),
    }
