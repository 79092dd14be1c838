"""`add` reading a TFLite file (.tflite): its inputs as the LiteRT interpreter reports them (the signature's
names where the file has one, else the tensors'; a fixed first axis is a fixed batch), whether it is a
full-integer model (each tensor's scale and zero point), and its outputs."""

from __future__ import annotations

from pathlib import Path

from pipeline.core.errors import first_line
from pipeline.prepare.add.axes import axes_notes, spec_shape
from pipeline.prepare.add.flags import Flags
from pipeline.prepare.add.inferred import AddError, Entry, Inferred, Input


def reads(path: Path) -> bool:
    return path.is_file() and path.suffix == ".tflite"


def inspect_tflite(name: str, path: Path, flags: Flags) -> Inferred:
    """The entry of a .tflite file: its inputs' names, dtypes and shapes (an open axis after the batch becomes
    a symbol, `--dim` giving its value); `name` is the model's."""
    from pipeline.runtimes.litert import full_integer, interpreter, signature_tensors

    try:
        inputs, outputs = signature_tensors(interpreter(path))
    except Exception as error:
        raise AddError(f"{path}: not a TFLite model the LiteRT interpreter reads: {first_line(error)}") from None
    specs: dict[str, Input] = {}
    used: dict[str, int] = {}
    for tensor in inputs:
        if tensor.dtype not in ("float32", "float16", "int64", "int32", "int8", "uint8", "bool"):
            raise AddError(f"{path}: input {tensor.name!r} is {tensor.dtype}: not an input the pipeline can feed")
        specs[tensor.name] = Input(spec_shape(tensor.name, tensor.shape, flags.dims, used), tensor.dtype)
    notes = [f"inputs from its {'signature' if inputs and inputs[0].name != inputs[0].tensor else 'tensors'}: "
             f"{', '.join(f'{t.name} {t.dtype} {t.shape}' for t in inputs)}"]  # fmt: skip
    first = next(iter(specs.values()), None)
    if first and first.shape and isinstance(first.shape[0], int):
        notes.append(f"batch fixed to {first.shape[0]} by the file: run at that batch")
    if integer := full_integer(inputs + outputs):
        notes.append(f"{integer}: its quantization is kept through the ONNX export (QDQ); the INT8 variants are "
                     "not built (they would quantize it again); its baseline runs it as is")  # fmt: skip
    notes.append("its baseline is the file itself in the LiteRT interpreter (variant tflite): every speed-up is "
                 "stated against what its users run")  # fmt: skip
    notes += axes_notes(path, flags.dims, used)
    entry = Entry("tflite", file=path.name, inputs=specs, dims=used)
    return Inferred(entry, {path.name: path}, [path.name], notes, output_names=[t.name for t in outputs])
