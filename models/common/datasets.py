"""Fixed, seeded splits for the zoo: train / calibration / eval, saved in the pipeline's .npz format."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits, make_classification
from sklearn.model_selection import train_test_split


@dataclass(frozen=True)
class Split:
    x: np.ndarray
    y: np.ndarray


@dataclass(frozen=True)
class Splits:
    train: Split
    calib: Split
    eval: Split

    def save(self, out_dir: Path, input_name: str) -> None:
        """One .npz per split: the input array under its model input name, plus `labels`.

        This is the same format a user gives for their own eval/calibration data.
        """
        for name, split in (("train", self.train), ("calib", self.calib), ("eval", self.eval)):
            np.savez(out_dir / f"{name}.npz", **{input_name: split.x, "labels": split.y})


def _three_way(x: np.ndarray, y: np.ndarray, calib: int, evaluation: int, seed: int) -> Splits:
    """Stratified split: `evaluation` held-out samples, `calib` for calibration, the rest to train."""
    x_rest, x_eval, y_rest, y_eval = train_test_split(x, y, test_size=evaluation, stratify=y, random_state=seed)
    x_train, x_calib, y_train, y_calib = train_test_split(
        x_rest, y_rest, test_size=calib, stratify=y_rest, random_state=seed
    )
    return Splits(Split(x_train, y_train), Split(x_calib, y_calib), Split(x_eval, y_eval))


def spam_like(seed: int, samples: int, features: int = 200) -> Splits:
    """A synthetic binary task with the source article's 200 features; hard enough that accuracy
    is not trivially 100% (label noise, few informative features)."""
    x, y = make_classification(
        n_samples=samples,
        n_features=features,
        n_informative=24,
        n_redundant=16,
        n_clusters_per_class=3,
        flip_y=0.02,
        class_sep=0.9,
        random_state=seed,
    )
    return _three_way(x.astype(np.float32), y.astype(np.int64), calib=512, evaluation=2000, seed=seed)


def digits(seed: int, layout: str = "nchw") -> Splits:
    """scikit-learn's bundled 8x8 handwritten digits (1797 real images), pixels scaled to [0, 1]."""
    bunch = load_digits()
    images = (bunch.images / 16.0).astype(np.float32)
    x = images[:, None, :, :] if layout == "nchw" else images[:, :, :, None]
    return _three_way(x, bunch.target.astype(np.int64), calib=200, evaluation=360, seed=seed)
