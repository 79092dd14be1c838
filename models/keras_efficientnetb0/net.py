"""Keras Applications EfficientNetB0, 224x224x3, weights=None (nothing is downloaded): the inference-frameworks
paper's architecture, benchmarked for speed; accuracy is fidelity to its own FP32 output."""

from __future__ import annotations

import keras


def build() -> keras.Model:
    return keras.applications.EfficientNetB0(weights=None, input_shape=(224, 224, 3))
