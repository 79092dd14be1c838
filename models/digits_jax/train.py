"""Train digits_jax with optax Adam on scikit-learn's digits (the same splits as digits_cnn, NHWC)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from models.common import datasets
from models.digits_jax.net import apply, build
from pipeline.prepare.sources.jaxfn import save_params


def train(settings: dict[str, Any], out_dir: Path) -> dict[str, Any]:
    splits = datasets.digits(settings["seed"], layout="nhwc")
    _, params = build(settings["seed"])
    optimizer = optax.adam(settings["lr"])
    state = optimizer.init(params)

    def loss_fn(params: Any, x: jax.Array, y: jax.Array) -> jax.Array:
        return optax.softmax_cross_entropy_with_integer_labels(apply(params, x), y).mean()

    @jax.jit
    def step(params: Any, state: Any, x: jax.Array, y: jax.Array) -> tuple[Any, Any, jax.Array]:
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        updates, state = optimizer.update(grads, state, params)
        return optax.apply_updates(params, updates), state, loss

    rng = np.random.default_rng(settings["seed"])
    x, y = splits.train.x, splits.train.y
    loss = jnp.inf
    for _ in range(settings["epochs"]):
        order = rng.permutation(len(x))
        for start in range(0, len(x), settings["batch_size"]):
            index = order[start : start + settings["batch_size"]]
            params, state, loss = step(params, state, x[index], y[index])
    save_params(params, out_dir / "params.msgpack")
    splits.save(out_dir, "image")

    def accuracy(split: datasets.Split) -> float:
        return float(np.mean(np.asarray(apply(params, split.x)).argmax(1) == split.y))

    return {
        "train_loss": float(loss),
        "train_accuracy": accuracy(splits.train),
        "eval_accuracy": accuracy(splits.eval),
        "train_samples": len(splits.train.y),
        "calib_samples": len(splits.calib.y),
        "eval_samples": len(splits.eval.y),
    }
