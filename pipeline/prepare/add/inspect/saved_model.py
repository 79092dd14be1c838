"""`add` reading a TensorFlow SavedModel folder (saved_model.pb): its serving_default signature's inputs."""

from __future__ import annotations

from pathlib import Path

from pipeline.core.errors import first_line
from pipeline.prepare.add.axes import axes_notes, spec_shape
from pipeline.prepare.add.flags import Flags
from pipeline.prepare.add.inferred import AddError, Entry, Inferred, Input

SIGNATURE = "serving_default"


def reads(path: Path) -> bool:
    return path.is_dir() and (path / "saved_model.pb").is_file()


def inspect_savedmodel(name: str, path: Path, flags: Flags) -> Inferred:
    """The entry of a SavedModel folder: its serving signature's inputs (names, dtypes, shapes; `--dim`
    giving an open axis's value); `name` is the model's."""
    try:
        from pipeline.prepare.sources.tfkeras import serving_signature

        _, signature, rescued = serving_signature(path)
    except KeyError:
        raise AddError(f"{path}: the SavedModel has no {SIGNATURE!r} signature: export it with one") from None
    except Exception as error:
        raise AddError(f"{path}: not a loadable SavedModel: {first_line(error)}") from None
    inputs: dict[str, Input] = {}
    used: dict[str, int] = {}
    for input_name, tensor in sorted(signature.structured_input_signature[1].items()):
        dtype = "str" if tensor.dtype.name == "string" else tensor.dtype.name  # tf.string: text, as the schema names it
        inputs[input_name] = Input(spec_shape(input_name, tensor.shape.as_list(), flags.dims, used), dtype)
    entry = Entry("savedmodel", file=path.name, inputs=inputs, dims=used)
    loader = f"; read by the TF1 loader ({rescued['seen']}: rescue {rescued['rescue']})" if rescued else ""
    return Inferred(entry, {path.name: path}, [path.name], [f"inputs from its {SIGNATURE} signature{loader}",
                                                            *axes_notes(path, flags.dims, used)])  # fmt: skip
