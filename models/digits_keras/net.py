"""A small Keras 3 CNN for scikit-learn's 8x8 digits (input N x 8 x 8 x 1, ten logits out)."""

from __future__ import annotations

import keras


def build() -> keras.Model:
    return keras.Sequential(
        [
            keras.Input((8, 8, 1), name="image"),
            keras.layers.Conv2D(16, 3, padding="same", activation="relu"),
            keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
            keras.layers.MaxPooling2D(2),
            keras.layers.Flatten(),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(10, name="logits"),
        ],
        name="digits_keras",
    )
