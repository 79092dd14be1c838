"""JAX source: `module:factory` returning (apply_fn, params), apply_fn(params, *inputs) -> outputs.

Parameters come from the factory (seeded by `init_seed`) or, with `file:`, from a Flax msgpack
file (flax.serialization) restored into the factory's parameter structure. ONNX export goes
through jax2onnx: jax2tf's graph serialization no longer works in JAX 0.10, and its native
serialization emits XlaCallModule, which tf2onnx cannot convert (both checked here).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import numpy as np

from pipeline.core.config import PARAMS_FILE, ExportConfig, ModelConfig
from pipeline.core.data import Arrays
from pipeline.core.errors import ConfigError, ModelFileError, first_line
from pipeline.core.model_code import as_list, import_object
from pipeline.prepare.sources.base import SourceModel, output_names

Apply = Callable[..., Any]


def save_params(params: Any, path: Path) -> None:
    """Parameters as Flax msgpack: the format the jax source and jax variants read."""
    from flax import serialization

    path.write_bytes(serialization.to_bytes(params))


def load_params(path: Path, like: Any, field: str) -> Any:
    from flax import serialization

    try:
        loaded = serialization.from_bytes(like, path.read_bytes())
    except Exception as error:
        raise ModelFileError(
            f"{path}: does not hold the factory's parameters ({PARAMS_FILE}: {field}.file): {first_line(error)}"
        ) from None
    mismatched = [
        jax.tree_util.keystr(key)
        for (key, a), b in zip(
            jax.tree_util.tree_leaves_with_path(like), jax.tree_util.tree_leaves(loaded), strict=True
        )
        if np.shape(a) != np.shape(b)
    ]
    if mismatched:
        raise ModelFileError(f"{path}: parameter shapes differ from the factory's at {', '.join(mismatched[:3])}")
    return loaded


def build_apply(config: ModelConfig, root: Path, field: str, params_file: Path | None) -> tuple[Apply, Any]:
    """The factory's (apply_fn, params), with params from `params_file` when given."""
    factory = import_object(config.factory or "", root, f"{field}.factory")
    try:
        result = factory(**config.factory_args)  # JAX has no global RNG: a seed, if any, is a factory arg
    except Exception as error:
        raise ConfigError(
            f"{PARAMS_FILE}: {field}.factory: calling {config.factory} failed: {first_line(error)}"
        ) from None
    if not (isinstance(result, tuple) and len(result) == 2 and callable(result[0])):
        raise ConfigError(
            f"{PARAMS_FILE}: {field}.factory: must return (apply_fn, params), got {type(result).__name__}"
        )
    apply, params = result
    if params_file is not None:
        params = load_params(params_file, params, field)
    return apply, params


class JaxSource(SourceModel):
    kind = "jax"

    def __init__(self, name: str, config: ModelConfig, root: Path, dims: dict[str, int] | None = None) -> None:
        super().__init__(name, config, root, dims)
        self.apply, self.params = build_apply(config, root, self.field, self.require_file() if config.file else None)
        self._jitted = jax.jit(self.apply)
        outputs = self.probe(lambda example: as_list(self._jitted(self.params, *example.values())))
        self._names = output_names(config, len(outputs), self.field)

    @property
    def output_names(self) -> list[str]:
        return self._names

    def predict(self, inputs: Arrays) -> Arrays:
        outputs = as_list(self._jitted(self.params, *(inputs[n] for n in self.config.inputs)))
        return {name: np.asarray(o) for name, o in zip(self._names, outputs, strict=True)}

    def export_onnx(self, path: Path, export: ExportConfig) -> dict[str, Any]:
        import jax2onnx

        from pipeline.core import onnx_files

        shapes = [tuple(spec.shape) for spec in self.config.inputs.values()]  # symbols stay symbolic
        apply, params = self.apply, self.params
        start = time.perf_counter()
        model = jax2onnx.to_onnx(
            lambda *inputs: apply(params, *inputs),
            shapes,
            model_name=self.name,
            opset=export.opset,
            input_names=list(self.config.inputs),
            output_names=self._names,
        )
        onnx_files.save(model, path)
        return {"exporter": "jax2onnx (jaxpr to ONNX)", "export_s": time.perf_counter() - start}


def load(name: str, config: ModelConfig, root: Path, dims: dict[str, int] | None = None) -> JaxSource:
    return JaxSource(name, config, root, dims)
