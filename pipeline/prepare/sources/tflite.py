"""A TFLite flatbuffer (.tflite), as on-device models ship (MediaPipe tasks, LiteRT models, files inside
many packages): read and run by the LiteRT interpreter (ai-edge-litert) with its default XNNPACK delegate, as
its users run it today, which gives the reference outputs; exported to ONNX by tf2onnx's TFLite path (a
full-integer model comes out as QDQ: its quantization is kept, not undone). OpenVINO reads the file itself
(pipeline.optimize.passes.openvino.convert, `frontend: auto`).

The names and the runner are pipeline.runtimes.litert's, shared with the `tflite` baseline variant.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pipeline.core.config import PARAMS_FILE, ExportConfig, ModelConfig
from pipeline.core.data import Arrays
from pipeline.core.errors import ConfigError, ModelFileError, first_line
from pipeline.prepare.sources.base import SourceModel, output_names
from pipeline.runtimes.litert import TfliteRunner, full_integer, spec_names

TF2ONNX_MAX_OPSET = 18  # the newest opset tf2onnx 1.17 emits


class TfliteSource(SourceModel):
    """A .tflite file in models/<name>/, run by the LiteRT interpreter."""

    kind = "tflite"

    def __init__(self, name: str, config: ModelConfig, root: Path, dims: dict[str, int] | None = None) -> None:
        super().__init__(name, config, root, dims)
        path = self.require_file()
        try:
            self._runner = TfliteRunner(path)
        except Exception as error:
            raise ModelFileError(
                f"{path}: not a TFLite model the LiteRT interpreter reads ({PARAMS_FILE}: {self.field}.file): "
                f"{first_line(error)}"
            ) from None
        found = [t.name for t in self._runner.inputs]
        if sorted(found) != sorted(config.inputs):
            raise ConfigError(
                f"{PARAMS_FILE}: {self.field}.inputs: names {sorted(config.inputs)} do not match the file's "
                f"inputs {sorted(found)} ({path})"
            )
        own = [t.name for t in self._runner.outputs]
        self._names = output_names(config, len(own), self.field, own)
        self.probe(self.predict)

    @property
    def output_names(self) -> list[str]:
        return self._names

    @property
    def notes(self) -> list[str]:
        if self.full_integer:
            return [f"{self.full_integer}: its quantization is kept (tf2onnx writes QDQ); its outputs are "
                    "compared as the integers it returns; its INT8 variants are not built (they would quantize it "
                    "again)"]  # fmt: skip
        return []

    @property
    def full_integer(self) -> str | None:
        return full_integer(self._runner.inputs + self._runner.outputs)

    def predict(self, inputs: Arrays) -> Arrays:
        outputs = self._runner.run(inputs)
        return dict(zip(self._names, outputs.values(), strict=True))

    def export_onnx(self, path: Path, export: ExportConfig) -> dict[str, Any]:
        import tf2onnx

        from pipeline.core import onnx_files

        start = time.perf_counter()
        try:
            model, _ = tf2onnx.convert.from_tflite(str(self.path), opset=min(export.opset, TF2ONNX_MAX_OPSET))
        except Exception as error:
            raise ModelFileError(f"{self.path}: tf2onnx could not convert it: {first_line(error)}") from None
        onnx_files.refuse_unknown_operators(model, f"tf2onnx {tf2onnx.__version__}")
        onnx_files.name_inputs(model, {t.tensor: t.name for t in self._runner.inputs})
        names = spec_names(self._runner.inputs, self._runner.outputs, self._names)
        onnx_files.name_outputs(model, [names[o.name] for o in model.graph.output])
        order = {name: i for i, name in enumerate(self._names)}
        outputs = sorted(model.graph.output, key=lambda o: order[o.name])
        del model.graph.output[:]
        model.graph.output.extend(outputs)
        onnx_files.save(model, path)
        return {"exporter": f"tf2onnx {tf2onnx.__version__} (from_tflite)", "export_s": time.perf_counter() - start}


def load(name: str, config: ModelConfig, root: Path, dims: dict[str, int] | None = None) -> TfliteSource:
    return TfliteSource(name, config, root, dims)
