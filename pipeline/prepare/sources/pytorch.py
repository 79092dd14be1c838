"""PyTorch source: a `module:factory` building the nn.Module plus a state_dict file."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pipeline.core.config import ExportConfig, InputSpec, ModelConfig
from pipeline.core.data import Arrays
from pipeline.prepare.sources.base import SourceModel, output_names
from pipeline.runtimes.torch_module import as_tuple, build_module, flat_outputs


def dynamic_shapes(specs: dict[str, InputSpec], named: bool = True) -> tuple[dict[int, Any], ...]:
    """torch.export's dynamic_shapes: one Dim per symbol, shared by every input axis that names it.

    `named=False` gives Dim.DYNAMIC instead: torch.export then infers each axis' range (a BERT's
    sequence axis stops at its 512 positions) rather than refusing a range it cannot prove."""
    symbols = {d for spec in specs.values() for d in spec.shape if isinstance(d, str)}
    dims = {name: torch.export.Dim(name) if named else torch.export.Dim.DYNAMIC for name in sorted(symbols)}
    return tuple({axis: dims[d] for axis, d in enumerate(spec.shape) if isinstance(d, str)} for spec in specs.values())


@contextmanager
def recurrent_layers_as_loops() -> Iterator[None]:
    """torch.export's while_loop decompositions of LSTM and GRU, for a whole dynamo export. torch.onnx 2.13
    registers them around its capture only; its decomposition step then computes each kept aten::lstm
    node's output shapes by the Python-loop decomposition, one cell per time step (resemblyzer's 3 layers of
    160 steps: 7.5-8.2 s an export, 4.0-4.7 s with them; the ONNX graph is the same, an LSTM node per layer).
    Upstream moves them around that step as well (pytorch/pytorch#193192, for a model whose time axis the
    per-step decomposition froze at the example's length)."""
    from torch.export._patches import register_gru_while_loop_decomposition, register_lstm_while_loop_decomposition

    with register_lstm_while_loop_decomposition(), register_gru_while_loop_decomposition():
        yield


class TorchSource(SourceModel):
    kind = "torch"

    def __init__(self, name: str, config: ModelConfig, root: Path, dims: dict[str, int] | None = None) -> None:
        super().__init__(name, config, root, dims)
        weights = self.require_file() if config.file else None
        self.module = build_module(
            config.factory or "", config.factory_args, weights, root, self.field, config.init_seed, self.rescues
        )
        found = self.probe(lambda example: flat_outputs(self._call(example))[0])
        self._names = output_names(config, len(found), self.field, found)

    def _declared(self, attribute: str) -> Any:
        """The first model config declaring `attribute` as an int: a Hugging Face model's own, or that of
        a module it wraps (a classifier head on `self.encoder`), walking the wrapper first."""
        for module in self.module.modules():
            config = getattr(module, "config", None)
            if isinstance(getattr(config, attribute, None), int):
                return config
        return None

    @property
    def vocab_size(self) -> int | None:
        config = self._declared("vocab_size")
        return config.vocab_size if config else None

    @property
    def type_vocab_size(self) -> int | None:
        config = self._declared("type_vocab_size")
        return config.type_vocab_size if config else None

    @property
    def attention(self) -> dict[str, Any]:
        """num_attention_heads, hidden_size and the architecture (`model_type`, which picks ORT's
        transformer fusions) of the config declaring attention heads."""
        config = self._declared("num_attention_heads")
        if config is None:
            return {}
        found = {"num_heads": config.num_attention_heads, "hidden_size": getattr(config, "hidden_size", None)}
        architecture = getattr(config, "model_type", None)
        return {k: v for k, v in found.items() if isinstance(v, int)} | (
            {"architecture": architecture} if isinstance(architecture, str) and architecture else {}
        )

    def exporter(self, export: ExportConfig) -> tuple[str, str]:
        """The torch.onnx exporter for this model, and why: the model's setting, else the export
        section's; `auto` takes TorchScript for a transformer, so that ORT's transformer optimizer
        finds the attention it fuses (it fuses none on the dynamo graph), and dynamo otherwise."""
        chosen = self.config.torch_exporter or export.torch_exporter
        if chosen != "auto":
            return chosen, "configured"
        if self.attention:
            return "torchscript", "auto: a transformer (its config declares attention heads): exported for fusion"
        return "dynamo", "auto: not a transformer"

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

        from pipeline.core import onnx_files

        example = tuple(torch.from_numpy(v) for v in self.example().values())
        exporter, why = self.exporter(export)
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
        with recurrent_layers_as_loops() if dynamo else nullcontext():
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
        onnx_files.resave(model, path)
        return {"exporter": f"torch.onnx ({exporter})", "exporter_why": why, "export_s": time.perf_counter() - start}


def load(name: str, config: ModelConfig, root: Path, dims: dict[str, int] | None = None) -> TorchSource:
    return TorchSource(name, config, root, dims)
