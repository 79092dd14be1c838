"""Models in the forms they ship in that are no ONNX graph, written by the libraries that write them, for
the `add` tests: TFLite files from TensorFlow's converter, a float one at a fixed batch of 1 with
MediaPipe's kind of outputs (scores [1, anchors, 1], points [1, 1, 1, 3 * landmarks]), and a full-integer
one (int8 inputs and outputs, each with its scale and zero point) with an open batch."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def _keras_cnn(batch: int | None, mediapipe_outputs: bool) -> object:
    import keras

    keras.utils.set_random_seed(0)
    image = keras.Input((16, 16, 3), batch_size=batch, name="image")
    x = keras.layers.Conv2D(8, 3, activation="relu")(image)
    x = keras.layers.GlobalAveragePooling2D()(x)
    if not mediapipe_outputs:
        return keras.Model(image, keras.layers.Dense(4, activation="softmax", name="probs")(x))
    scores = keras.layers.Reshape((8, 1), name="scores")(keras.layers.Dense(8)(x))
    points = keras.layers.Reshape((1, 1, 12), name="points")(keras.layers.Dense(12)(x))
    return keras.Model(image, [scores, points])


def write_tflite(folder: Path, full_integer: bool = False) -> Path:
    """folder/model.tflite: float (batch fixed to 1, two outputs) or full-integer (int8 in and out, batch open),
    converted by tf.lite.TFLiteConverter from a seeded Keras CNN on 16x16x3 images."""
    import tensorflow as tf

    model = _keras_cnn(None if full_integer else 1, mediapipe_outputs=not full_integer)
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    if full_integer:
        rng = np.random.default_rng(0)
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = lambda: ([rng.random((1, 16, 16, 3), dtype=np.float32)] for _ in range(16))
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        converter.inference_input_type = converter.inference_output_type = tf.int8
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "model.tflite"
    path.write_bytes(converter.convert())
    return path
