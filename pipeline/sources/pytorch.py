"""PyTorch source: a `module:factory` building the nn.Module plus a state_dict file."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pipeline.config import PARAMS_FILE, ExportConfig, ModelConfig
from pipeline.data import Arrays, generate_inputs
from pipeline.errors import ConfigError, ModelFileError, first_line, one_line
from pipeline.sources.base import SourceModel, import_object, output_names


def build_module(
    factory_ref: str, factory_args: dict[str, Any], weights: Path | None, root: Path, field: str, init_seed: int = 0
) -> torch.nn.Module:
    """Instantiate the factory and load the weights; shared by the source and the torch runtime.

    Without a weights file the factory's own initialisation is used, seeded: an architecture
    benchmarked for speed (like Keras' weights=None), measured for fidelity to itself.
    """
    factory = import_object(factory_ref, root, f"{field}.factory")
    torch.manual_seed(init_seed)
    try:
        module = factory(**factory_args)
    except Exception as error:
        raise ConfigError(f"{PARAMS_FILE}: {field}.factory: calling {factory_ref} failed: {one_line(error)}") from None
    if not isinstance(module, torch.nn.Module):
        raise ConfigError(f"{PARAMS_FILE}: {field}.factory: returned {type(module).__name__}, expected torch.nn.Module")
    if weights is None:
        return module.eval()
    try:
        state = torch.load(weights, map_location="cpu", weights_only=True)
    except Exception as error:
        raise ModelFileError(
            f"{weights}: not a readable PyTorch state_dict ({PARAMS_FILE}: {field}.file): "
            f"{type(error).__name__}: {first_line(error)}"
        ) from None
    try:
        module.load_state_dict(state)
    except (RuntimeError, TypeError, AttributeError) as error:
        raise ModelFileError(
            f"{weights}: does not fit {factory_ref} ({PARAMS_FILE}: {field}.file): {one_line(error)}"
        ) from None
    return module.eval()


def as_tuple(result: Any) -> tuple[torch.Tensor, ...]:
    if isinstance(result, torch.Tensor):
        return (result,)
    if isinstance(result, dict):
        return tuple(result.values())
    return tuple(result)


class TorchSource(SourceModel):
    kind = "torch"

    def __init__(self, name: str, config: ModelConfig, root: Path) -> None:
        super().__init__(name, config, root)
        weights = self.require_file() if config.file else None
        self.module = build_module(
            config.factory or "", config.factory_args, weights, root, self.field, config.init_seed
        )
        outputs = self.probe(self._forward)
        self._names = output_names(config, len(outputs), self.field)

    def _forward(self, inputs: Arrays) -> tuple[torch.Tensor, ...]:
        with torch.inference_mode():
            return as_tuple(self.module(*(torch.from_numpy(np.ascontiguousarray(v)) for v in inputs.values())))

    @property
    def output_names(self) -> list[str]:
        return self._names

    def predict(self, inputs: Arrays) -> Arrays:
        return {n: t.numpy() for n, t in zip(self._names, self._forward(inputs), strict=True)}

    def export_onnx(self, path: Path, export: ExportConfig) -> dict[str, Any]:
        # Batch 2, not 1: torch.export specialises dimensions of size 1 and would fix the batch axis.
        example = tuple(torch.from_numpy(v) for v in generate_inputs(self.config.inputs, 2, seed=0).values())
        dynamo = export.torch_exporter == "dynamo"
        if dynamo:  # torch.export names the batch axis with a Dim shared by inputs that share its name
            dims = {s.batch_dim: torch.export.Dim(s.batch_dim) for s in self.config.inputs.values()}
            dynamic: dict[str, Any] = {
                "dynamic_shapes": tuple({0: dims[s.batch_dim]} for s in self.config.inputs.values())
            }
        else:
            axes = {n: {0: s.batch_dim} for n, s in self.config.inputs.items()} | {n: {0: "batch"} for n in self._names}
            dynamic = {"dynamic_axes": axes}
        start = time.perf_counter()
        torch.onnx.export(
            self.module,
            example,
            str(path),
            input_names=list(self.config.inputs),
            output_names=self._names,
            opset_version=export.opset,
            dynamo=dynamo,
            external_data=False,
            **dynamic,
        )
        return {"exporter": f"torch.onnx ({export.torch_exporter})", "export_s": time.perf_counter() - start}


def load(name: str, config: ModelConfig, root: Path) -> TorchSource:
    return TorchSource(name, config, root)
