"""JAX on the CPU: jax_jit (the apply function under jax.jit) or jax_xla (a jax.export artifact).

Calls are dispatched asynchronously, so the timed call blocks until the result is ready. Loading
ends with one batch-1 call: load_ms includes XLA's compilation, as a deployment pays it. XLA's CPU
thread pool is sized from the environment (XLA_FLAGS), which the bench stage sets before start.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import numpy as np
from flax import serialization

from pipeline.core.data import Arrays
from pipeline.core.model_code import as_list, import_object
from pipeline.core.records import code_entry
from pipeline.runtimes import base
from pipeline.runtimes.base import Session, code_root


class Config(base.Config):
    """What the JAX adapter reads of its build's runtime_config (beside layout and code_root)."""

    compile_at_load: bool | None = None  # compile once at load with a batch-1 call


class Details(base.Details):
    """What its sessions report (Session.details); None in a record written before the key was."""

    kind: str | None = None  # jit or export
    backend: str | None = None
    xla_flags: str | None = None


class JaxSession(Session):
    def __init__(self, entry: Path, threads: int, config: Config) -> None:
        spec = code_entry.load(entry)
        state = serialization.msgpack_restore((entry.parent / (spec.params or "")).read_bytes())
        if spec.kind == "export":
            exported = jax.export.deserialize(bytearray((entry.parent / (spec.exported or "")).read_bytes()))
            function, params = jax.jit(exported.call), state
        else:
            apply, template = import_object(spec.factory or "", code_root(config), "jax artifact")(**spec.factory_args)
            function, params = jax.jit(apply), serialization.from_state_dict(template, state)
        self._function, self._params = function, jax.device_put(params)
        self.input_names, self.output_names, self._kind = spec.inputs, spec.outputs, spec.kind
        if config.compile_at_load:  # one batch-1 call: jit compiles and caches per input shape
            zeros = [np.zeros((1, *s.shape), s.dtype) for s in spec.input_specs.values()]
            jax.block_until_ready(self._function(self._params, *zeros))

    def run(self, inputs: Arrays) -> Arrays:
        outputs = as_list(self._function(self._params, *(inputs[n] for n in self.input_names)))
        return {name: np.asarray(o) for name, o in zip(self.output_names, outputs, strict=True)}

    def prepare(self, inputs: Arrays) -> Callable[[], Any]:
        function, params = self._function, self._params
        arrays = [jax.device_put(inputs[n]) for n in self.input_names]
        return lambda: jax.block_until_ready(function(params, *arrays))

    def details(self) -> dict[str, Any]:
        return Details.model_validate(
            {"kind": self._kind, "backend": jax.default_backend(), "xla_flags": os.getenv("XLA_FLAGS", "")}
        ).as_dict()


def load(artifact: Path, threads: int, config: Config, target: str = "cpu") -> JaxSession:
    return JaxSession(artifact, threads, config)
