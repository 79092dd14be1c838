"""PyTorch source: a `module:factory` building the nn.Module plus a state_dict file."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pipeline.config import PARAMS_FILE, ExportConfig, InputSpec, ModelConfig
from pipeline.data import Arrays
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


def flat_outputs(result: Any) -> tuple[list[str], list[torch.Tensor]]:
    """The model's output tensors in torch.export's (pytree) order, with stable names.

    A tensor is `output`; a tuple gives `output0`, `output1`; dict keys (and Hugging Face
    ModelOutput fields) give their own names; nesting joins them with '_' (`output0_1`).
    """
    from torch.utils import _pytree

    leaves = [
        (path, leaf) for path, leaf in _pytree.tree_flatten_with_path(result)[0] if isinstance(leaf, torch.Tensor)
    ]
    names = []
    for path, _ in leaves:
        parts = [str(getattr(key, "key", getattr(key, "idx", getattr(key, "name", key)))) for key in path]
        if not parts or parts[0].isdigit():
            parts = ["output" + (parts[0] if parts else ""), *parts[1:]]
        names.append("_".join(parts))
    return names, [leaf for _, leaf in leaves]


def as_tuple(result: Any) -> tuple[torch.Tensor, ...]:
    return tuple(flat_outputs(result)[1])


def dynamic_shapes(specs: dict[str, InputSpec], named: bool = True) -> tuple[dict[int, Any], ...]:
    """torch.export's dynamic_shapes: one Dim per symbol, shared by every input axis that names it.

    `named=False` gives Dim.DYNAMIC instead: torch.export then infers each axis' range (a BERT's
    sequence axis stops at its 512 positions) rather than refusing a range it cannot prove."""
    symbols = {d for spec in specs.values() for d in spec.shape if isinstance(d, str)}
    dims = {name: torch.export.Dim(name) if named else torch.export.Dim.DYNAMIC for name in sorted(symbols)}
    return tuple({axis: dims[d] for axis, d in enumerate(spec.shape) if isinstance(d, str)} for spec in specs.values())


class TorchSource(SourceModel):
    kind = "torch"

    def __init__(self, name: str, config: ModelConfig, root: Path, dims: dict[str, int] | None = None) -> None:
        super().__init__(name, config, root, dims)
        weights = self.require_file() if config.file else None
        self.module = build_module(
            config.factory or "", config.factory_args, weights, root, self.field, config.init_seed
        )
        found = self.probe(lambda example: flat_outputs(self._call(example))[0])
        self._names = output_names(config, len(found), self.field, found)

    @property
    def vocab_size(self) -> int | None:
        """Hugging Face models (and any module with a `config.vocab_size`) declare their vocabulary."""
        size = getattr(getattr(self.module, "config", None), "vocab_size", None)
        return int(size) if isinstance(size, int) else None

    @property
    def attention(self) -> dict[str, int]:
        """A Hugging Face config's num_attention_heads and hidden_size, when the module has one."""
        config = getattr(self.module, "config", None)
        found = {"num_heads": "num_attention_heads", "hidden_size": "hidden_size"}
        values = {key: getattr(config, attribute, None) for key, attribute in found.items()}
        return {key: value for key, value in values.items() if isinstance(value, int)}

    def _call(self, inputs: Arrays) -> Any:
        with torch.inference_mode():
            return self.module(*(torch.from_numpy(np.ascontiguousarray(v)) for v in inputs.values()))

    def _weight_bytes(self) -> int:
        tensors = [*self.module.parameters(), *self.module.buffers()]
        return sum(t.numel() * t.element_size() for t in tensors)

    @property
    def output_names(self) -> list[str]:
        return self._names

    def predict(self, inputs: Arrays) -> Arrays:
        return {n: t.numpy() for n, t in zip(self._names, as_tuple(self._call(inputs)), strict=True)}

    def export_onnx(self, path: Path, export: ExportConfig) -> dict[str, Any]:
        import onnx

        from pipeline import onnx_files

        example = tuple(torch.from_numpy(v) for v in self.example().values())
        exporter = self.config.torch_exporter or export.torch_exporter
        dynamo = exporter == "dynamo"
        exported_names = [f"__output{i}" for i in range(len(self._names))]  # renamed below, collision-safe
        if dynamo:
            dynamic: dict[str, Any] = {"dynamic_shapes": dynamic_shapes(self.config.inputs)}
        else:
            specs = self.config.inputs
            axes = {n: {i: d for i, d in enumerate(s.shape) if isinstance(d, str)} for n, s in specs.items()}
            if self.config.fixed_batch is None:
                axes |= {n: {0: str(self.config.batch_dim)} for n in exported_names}
            dynamic = {"dynamic_axes": axes, "output_names": exported_names}
        start = time.perf_counter()
        torch.onnx.export(
            self.module,
            example,
            str(path),
            input_names=list(self.config.inputs),
            opset_version=export.opset,
            dynamo=dynamo,
            external_data=self._weight_bytes() > onnx_files.EXTERNAL_ABOVE,
            **dynamic,
        )
        model = onnx.load(str(path))
        onnx_files.name_outputs(model, self._names)  # after export: a chosen name may collide with a tensor's
        onnx_files.save(model, path)
        return {"exporter": f"torch.onnx ({exporter})", "export_s": time.perf_counter() - start}


def load(name: str, config: ModelConfig, root: Path, dims: dict[str, int] | None = None) -> TorchSource:
    return TorchSource(name, config, root, dims)
