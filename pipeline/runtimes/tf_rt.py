"""TensorFlow: a SavedModel called through its serving_default signature.

Thread pools are sized before TensorFlow starts (they cannot change afterwards). For tf_xla the
load ends with one batch-1 call, so that load_ms includes XLA's compilation, as a deployment pays it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from pipeline.core.data import Arrays
from pipeline.runtimes import base
from pipeline.runtimes.base import Session

SIGNATURE = "serving_default"


class Config(base.Config):
    """What the TensorFlow adapter reads of its build's runtime_config (beside layout and code_root)."""

    compile_at_load: bool | None = None  # compile once at load with a batch-1 call


class Details(base.Details):
    """What its sessions report (Session.details); None in a record written before the key was."""

    intra_op_threads: int | None = None
    inter_op_threads: int | None = None
    xla_compiled_at_load: bool | None = None


def as_numpy(tensor: tf.Tensor) -> np.ndarray:
    """A TF output as the pipeline keeps it: numbers as they are, tf.string as text ('<U'), not bytes objects."""
    value = np.asarray(tensor)
    return np.char.decode(value.astype(np.bytes_), "utf-8") if tensor.dtype == tf.string else value


class TfSession(Session):
    def __init__(self, path: Path, threads: int, config: Config) -> None:
        try:
            tf.config.threading.set_intra_op_parallelism_threads(threads)
            tf.config.threading.set_inter_op_parallelism_threads(1)
        except RuntimeError:  # TensorFlow already started in this process: its pools stay (and are reported)
            pass
        self._loaded = tf.saved_model.load(str(path))
        self._signature = self._loaded.signatures[SIGNATURE]
        self.input_names = list(self._signature.structured_input_signature[1])
        self.output_names = list(self._signature.structured_outputs)
        self._compile_at_load = bool(config.compile_at_load)
        if self._compile_at_load:
            specs = self._signature.structured_input_signature[1]
            self._signature(**{n: tf.zeros([1, *s.shape[1:]], s.dtype) for n, s in specs.items()})

    def _tensors(self, inputs: Arrays) -> dict[str, tf.Tensor]:
        return {name: tf.constant(inputs[name]) for name in self.input_names}

    def run(self, inputs: Arrays) -> Arrays:
        outputs = self._signature(**self._tensors(inputs))
        return {name: as_numpy(outputs[name]) for name in self.output_names}

    def prepare(self, inputs: Arrays) -> Callable[[], Any]:
        signature, tensors = self._signature, self._tensors(inputs)
        return lambda: signature(**tensors)

    def details(self) -> dict[str, Any]:
        return Details.model_validate(
            {
                "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
                "inter_op_threads": tf.config.threading.get_inter_op_parallelism_threads(),
                "xla_compiled_at_load": self._compile_at_load,
            }
        ).as_dict()


def load(artifact: Path, threads: int, config: Config, target: str = "cpu") -> TfSession:
    return TfSession(artifact, threads, config)
