"""A small CNN in plain JAX for scikit-learn's 8x8 digits (input N x 8 x 8 x 1, ten logits out).

The factory returns (apply, params), the contract of the pipeline's JAX source.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

Params = dict[str, Any]


def init(key: jax.Array) -> Params:
    k1, k2, k3, k4 = jax.random.split(key, 4)

    def he(k: jax.Array, shape: tuple[int, ...], fan_in: int) -> jax.Array:
        return jax.random.normal(k, shape) * jnp.sqrt(2.0 / fan_in)

    return {
        "conv1": {"w": he(k1, (3, 3, 1, 16), 9), "b": jnp.zeros(16)},
        "conv2": {"w": he(k2, (3, 3, 16, 32), 144), "b": jnp.zeros(32)},
        "dense1": {"w": he(k3, (4 * 4 * 32, 64), 512), "b": jnp.zeros(64)},
        "dense2": {"w": he(k4, (64, 10), 64), "b": jnp.zeros(10)},
    }


def conv(x: jax.Array, layer: Params) -> jax.Array:
    y = jax.lax.conv_general_dilated(x, layer["w"], (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return jax.nn.relu(y + layer["b"])


def apply(params: Params, image: jax.Array) -> jax.Array:
    x = conv(conv(image, params["conv1"]), params["conv2"])
    # 2x2 max pooling as reshape + max: jax2onnx turns an NHWC reduce_window into a MaxPool with a
    # 4-D kernel that ONNX Runtime rejects ("Unsupported pooling size"); this form exports cleanly.
    n, h, w, c = x.shape
    x = x.reshape(n, h // 2, 2, w // 2, 2, c).max(axis=(2, 4))
    x = x.reshape(n, -1)
    x = jax.nn.relu(x @ params["dense1"]["w"] + params["dense1"]["b"])
    return x @ params["dense2"]["w"] + params["dense2"]["b"]


def build(seed: int = 0) -> tuple[Any, Params]:
    return apply, init(jax.random.PRNGKey(seed))
