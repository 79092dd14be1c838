"""`add` reading a Keras model file: a Keras 3 `.keras` file, or a whole-model HDF5 file (`.h5`, `.hdf5`) an
older Keras saved, which Keras 3's load_model reads through its legacy HDF5 loader; its input layers."""

from __future__ import annotations

import re
from pathlib import Path

from pipeline.core.errors import first_line
from pipeline.prepare.add.axes import axes_notes, spec_shape
from pipeline.prepare.add.flags import Flags
from pipeline.prepare.add.inferred import AddError, Entry, Inferred, Input

KERAS_FILES = (".keras", ".h5", ".hdf5")


def reads(path: Path) -> bool:
    return path.is_file() and path.suffix in KERAS_FILES


def inspect_keras(name: str, path: Path, flags: Flags) -> Inferred:
    """The entry of a Keras file (`.keras`, or a Keras 2 `.h5`): its inputs' names (Keras' input layers), dtypes
    and shapes (an open axis after the batch becomes a symbol, `--dim` giving its value); `name` is the model's."""
    from pipeline.core.config import InputSpec

    try:
        import keras

        model = keras.saving.load_model(str(path), compile=False)
    except Exception as error:
        raise AddError(f"{path}: not a loadable Keras model: {first_line(error)}") from None
    inputs: dict[str, Input] = {}
    used_dims: dict[str, int] = {}
    for i, tensor in enumerate(model.inputs):
        input_name = re.sub(r"\W", "_", str(tensor.name).split(":")[0]).strip("_") or f"input_{i}"
        dtype = str(getattr(tensor.dtype, "name", tensor.dtype))
        spec = Input(spec_shape(input_name, list(tensor.shape), flags.dims, used_dims), dtype)
        try:
            InputSpec.model_validate(spec.as_yaml())
        except ValueError:
            raise AddError(
                f"{path}: input {input_name!r} is {dtype} {spec.shape}: not an input the pipeline can feed"
            ) from None
        inputs[input_name] = spec
    notes = axes_notes(path, flags.dims, used_dims)
    entry = Entry("keras", file=path.name, inputs=inputs, dims=used_dims)
    return Inferred(entry, {path.name: path}, [path.name], notes)
