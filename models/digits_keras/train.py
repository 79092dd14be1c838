"""Train digits_keras with Keras fit on scikit-learn's digits (the same splits as digits_cnn, NHWC)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from models.common import datasets
from models.digits_keras.net import build


def train(settings: dict[str, Any], out_dir: Path) -> dict[str, Any]:
    keras.utils.set_random_seed(settings["seed"])
    tf.config.experimental.enable_op_determinism()
    tf.config.threading.set_intra_op_parallelism_threads(1)  # weights independent of the core count
    splits = datasets.digits(settings["seed"], layout="nhwc")
    model = build()
    model.compile(
        optimizer=keras.optimizers.Adam(settings["lr"]),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    history = model.fit(
        splits.train.x, splits.train.y, epochs=settings["epochs"], batch_size=settings["batch_size"], verbose=0
    )
    model.save(out_dir / "model.keras")
    splits.save(out_dir, "image")

    def accuracy(split: datasets.Split) -> float:
        return float(np.mean(model.predict(split.x, verbose=0).argmax(1) == split.y))

    return {
        "train_loss": float(history.history["loss"][-1]),
        "train_accuracy": accuracy(splits.train),
        "eval_accuracy": accuracy(splits.eval),
        "train_samples": len(splits.train.y),
        "calib_samples": len(splits.calib.y),
        "eval_samples": len(splits.eval.y),
    }
