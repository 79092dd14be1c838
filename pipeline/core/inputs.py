"""What a model is fed, checked: a user's .npz checked against the input spec (names, shapes, dtypes,
then values: token ids within the vocabulary, 0/1 masks, finite floats), with errors that name the
file and the params.yaml field; and the model's own layout (a state's batch axis, a 0-d input) to and
from the rows-first arrays the pipeline holds."""

from __future__ import annotations

import re
import zipfile
from pathlib import Path
from typing import NoReturn

import numpy as np

from pipeline.core.config import PARAMS_FILE, InputSpec
from pipeline.core.data import LABELS, Arrays, DataSet
from pipeline.core.errors import ModelFileError

# Inputs an embedding looks up, and what their bound is called in errors.
ID_KINDS = {"token_ids": ("token ids", "the vocabulary"), "token_type_ids": ("token type ids", "the type vocabulary")}


def rows_first(arrays: Arrays, specs: dict[str, InputSpec]) -> Arrays:
    """Arrays as a user writes them, in the model's layout (a state [layers, batch, hidden], a 0-d
    sample rate), in the pipeline's rows-first layout: the batch axis moved to the front, a scalar
    repeated per row (its spec's value where the file leaves it out). Inputs already rows first, and
    arrays of another rank (check_inputs names them), pass as they are."""
    out, rows = dict(arrays), 1
    for name, spec in specs.items():
        value = arrays.get(name)
        if value is not None and not spec.scalar and value.ndim:
            moved = spec.batch_axis and value.ndim == len(spec.shape)
            out[name] = np.moveaxis(value, spec.batch_axis, 0) if moved else value
            rows = len(out[name])
    for name, spec in specs.items():
        value = arrays.get(name)
        if spec.scalar and (value is None or value.ndim == 0):
            filled = spec.value if value is None else value.item()
            out[name] = np.full(rows, filled, dtype=np.dtype(spec.dtype) if value is None else value.dtype)
    return out


def to_model_layout(arrays: Arrays, specs: dict[str, InputSpec]) -> Arrays:
    """Rows-first arrays in the layout the model takes: a scalar as its one 0-d value (check_inputs
    holds every row to the same), the batch axis back where the model has it."""
    out = {}
    for name, value in arrays.items():
        spec = specs.get(name)
        if spec is not None and spec.scalar:
            out[name] = np.asarray(value.reshape(-1)[0]) if value.size else np.asarray(spec.value, spec.dtype)
        elif spec is not None and spec.batch_axis:
            out[name] = np.ascontiguousarray(np.moveaxis(value, 0, spec.batch_axis))
        else:
            out[name] = value
    return out


def outputs_rows_first(outputs: Arrays, batch_axes: dict[str, int]) -> Arrays:
    """A model's outputs rows first: the outputs whose batch axis is not the first (`batch_axes`: a
    state's) have it moved to the front, the way fidelity and batching read rows."""
    return {k: np.moveaxis(v, batch_axes[k], 0) if batch_axes.get(k) else v for k, v in outputs.items()}


def outputs_to_model(outputs: Arrays, batch_axes: dict[str, int]) -> Arrays:
    """The inverse of outputs_rows_first: what the model itself returns for the same rows."""
    return {k: np.moveaxis(v, 0, batch_axes[k]) if batch_axes.get(k) else v for k, v in outputs.items()}


def check_inputs(arrays: Arrays, specs: dict[str, InputSpec], what: str) -> Arrays:
    """Check names, ranks, fixed dimensions and dtypes against the spec, on rows-first arrays
    (rows_first); cast safe dtypes.

    A symbolic dimension takes any size, but the same size in every input that names it. A scalar
    input holds one value for every row (its spec's): rows with another cannot share a call."""
    checked: Arrays = {}
    sizes = set()
    seen: dict[str, tuple[str, int]] = {}
    for name, spec in specs.items():
        if name not in arrays:
            raise ModelFileError(
                f"{what}: missing array {name!r} (input names: {', '.join(specs)}; got: {', '.join(arrays)})"
            )
        value = arrays[name]
        row_shape = ["rows", *spec.row_shape]
        expected = "(" + ", ".join(map(str, spec.shape if spec.rows_first else row_shape)) + ")"
        if spec.batch_axis:
            expected += f" rows first (the model's {tuple(spec.shape)} with its batch axis {spec.batch_axis} first)"
        if spec.scalar and value.size and (value.min() != spec.value or value.max() != spec.value):
            found = value.max() if value.max() != spec.value else value.min()
            raise ModelFileError(
                f"{what}: array {name!r} holds {found}: a scalar input passes one value on every call "
                f"(the entry's value: {spec.value:g})"
            )
        if value.ndim != len(row_shape):
            raise ModelFileError(f"{what}: array {name!r} has shape {value.shape}, expected {expected}")
        for axis, (dim, size) in enumerate(zip(row_shape, value.shape, strict=True)):
            if axis == 0:
                continue  # data files hold any number of samples, chunked to a fixed batch when needed
            if isinstance(dim, int) and size != dim:
                raise ModelFileError(
                    f"{what}: array {name!r} has shape {value.shape}, expected {expected} (axis {axis} is fixed)"
                )
            if isinstance(dim, str):
                other, known = seen.setdefault(dim, (name, size))
                if known != size:
                    raise ModelFileError(f"{what}: dimension {dim!r} is {size} in {name!r} but {known} in {other!r}")
        target = np.dtype(spec.dtype)
        if target.kind == "U" and value.dtype.kind in "OS":  # text as bytes (v2's BYTES) or Python strings
            value = _as_text(value, what, name)
        if not np.can_cast(value.dtype, target, casting="same_kind"):
            raise ModelFileError(f"{what}: array {name!r} has dtype {value.dtype}, expected {spec.dtype}")
        if value.size and target.kind in "iu" and not np.can_cast(value.dtype, target):  # a narrowing int cast
            limits = np.iinfo(target)
            if value.min() < limits.min or value.max() > limits.max:  # would wrap into a plausible id
                raise ModelFileError(
                    f"{what}: array {name!r} holds {value.max() if value.max() > limits.max else value.min()}, "
                    f"outside {spec.dtype}'s range [{limits.min}, {limits.max}] the model takes"
                )
        checked[name] = value.astype(target, copy=False)
        sizes.add(len(value))
    if len(sizes) != 1 or 0 in sizes:
        raise ModelFileError(f"{what}: inputs must have the same, non-zero number of samples (got {sorted(sizes)})")
    return checked


def _as_text(value: np.ndarray, what: str, name: str) -> np.ndarray:
    """A text input's elements as numpy strings: bytes decoded as UTF-8, str kept; anything else refused."""
    try:
        return np.array([v.decode() if isinstance(v, bytes) else _text(v) for v in value.ravel()], dtype=str).reshape(
            value.shape
        )
    except (UnicodeDecodeError, TypeError) as error:
        raise ModelFileError(f"{what}: array {name!r} holds something other than UTF-8 text: {error}") from None


def _text(item: object) -> str:
    if not isinstance(item, str):
        raise TypeError(f"a {type(item).__name__} where text was expected")
    return item


def declared_bounds(specs: dict[str, InputSpec]) -> dict[str, int]:
    """The exclusive upper bound the spec itself gives each token input (its `high`)."""
    return {name: int(spec.high) for name, spec in specs.items() if spec.kind in ID_KINDS and spec.high is not None}


def check_input_values(
    arrays: Arrays,
    specs: dict[str, InputSpec],
    what: str,
    bounds: dict[str, int],
    allow_nonfinite: bool = False,
    nonfinite_hint: str = "",
) -> None:
    """Refuse values a runtime would misread without failing: an embedding's Gather counts a
    negative id from the end, and OpenVINO's returns zeros for an id past the vocabulary (ONNX
    Runtime fails, naming a graph node, not the input); a mask that is not 0/1 or masks a whole
    row, and NaN or Inf, give wrong numbers, not errors.

    Token ids (`token_ids`, `token_type_ids`) must lie in [0, bounds[name]) (be >= 0 where no bound
    is known), masks hold 0 and 1 with a 1 in every row, other integers within the spec's [low, high)
    where it declares one (`add` takes it from the eval data), floats are finite unless `allow_nonfinite`
    (`nonfinite_hint` says how to allow them). Valid arrays cost a min and a max each, no copies;
    only a refusal looks for the offending row. `arrays` are as check_inputs returns them."""
    for name, spec in specs.items():
        value = arrays[name]
        if not value.size:
            continue
        if spec.kind == "attention_mask":
            if value.min() < 0 or value.max() > 1:
                _refuse(what, name, value, (value != 0) & (value != 1), "a mask holds only 0 and 1")
            attended = value.reshape(len(value), -1).max(axis=1)
            if attended.min() == 0:
                row = int(np.argmin(attended))
                raise ModelFileError(f"{what}: array {name!r} row {row} is all 0: a mask must attend to some position")
        elif spec.kind in ID_KINDS:
            bound, (ids, vocabulary) = bounds.get(name), ID_KINDS[spec.kind]
            if bound is None:
                if value.min() < 0:
                    _refuse(what, name, value, value < 0, f"{ids} must be >= 0 ({vocabulary} is not recorded)")
            elif value.min() < 0 or value.max() >= bound:
                _refuse(
                    what, name, value, (value < 0) | (value >= bound), f"{ids} must lie in [0, {bound}), {vocabulary}"
                )
        elif value.dtype.kind in "iu" and (spec.low is not None or spec.high is not None):
            low = spec.low if spec.low is not None else -np.inf
            high = spec.high if spec.high is not None else np.inf
            if value.min() < low or value.max() >= high:
                _refuse(what, name, value, (value < low) | (value >= high),
                        f"values must lie in [{low:g}, {high:g}), the range the model was measured on")  # fmt: skip
        elif value.dtype.kind == "f" and not allow_nonfinite and not np.isfinite([value.min(), value.max()]).all():
            _refuse(what, name, value, ~np.isfinite(value), f"inputs must be finite{nonfinite_hint}")


def _refuse(what: str, name: str, value: np.ndarray, bad: np.ndarray, rule: str) -> NoReturn:
    """The one-line error: the first offending row and its first offending value."""
    rows = bad.reshape(len(bad), -1)
    row = int(np.argmax(rows.any(axis=1)))
    found = value.reshape(len(value), -1)[row][rows[row]][0].item()
    raise ModelFileError(f"{what}: array {name!r} row {row} holds {found}: {rule}")


def dims_of(arrays: Arrays, specs: dict[str, InputSpec]) -> dict[str, int]:
    """The value each symbolic dimension (besides the batch axis) takes in rows-first `arrays`."""
    return {
        dim: int(arrays[name].shape[axis + 1])
        for name, spec in specs.items()
        for axis, dim in enumerate(spec.row_shape)
        if isinstance(dim, str)
    }


RUNTIME_NAME = re.compile(r"^(?:serving_default_)?(?P<name>.+?)(?::\d+)?$")  # LiteRT's, TF's tensor names


def runtime_names(names: list[str], specs: dict[str, InputSpec]) -> dict[str, str]:
    """{array name: the input it denotes} for arrays named as a runtime prints the input's tensor (LiteRT's
    `serving_default_X:0`, TensorFlow's `X:0`) rather than by the signature's name `X`; an input present by its
    own name keeps it."""
    found = {}
    for name in names:
        match = RUNTIME_NAME.match(name)
        wanted = match.group("name") if match else name
        if name not in specs and wanted in specs and wanted not in names:
            found[name] = wanted
    return found


def by_input_name(arrays: Arrays, specs: dict[str, InputSpec]) -> Arrays:
    """`arrays` with those named as a runtime prints an input's tensor (runtime_names) under the input's own name."""
    renamed = runtime_names(list(arrays), specs)
    return {renamed.get(name, name): value for name, value in arrays.items()}


def load_user_data(
    path: Path, specs: dict[str, InputSpec], field_name: str, bounds: dict[str, int] | None = None
) -> DataSet:
    """Read a user's .npz (inputs by name + optional labels); errors name the file and the field.

    Values are checked (check_input_values) against `bounds`, by default the spec's own `high`s."""
    what = f"{path} ({PARAMS_FILE}: {field_name})"
    if not path.is_file():
        raise ModelFileError(f"{what}: file not found")
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except (OSError, ValueError, zipfile.BadZipFile) as error:
        raise ModelFileError(f"{what}: not a readable .npz file ({error})") from None
    arrays = by_input_name(arrays, specs)
    inputs = check_inputs(rows_first(arrays, specs), specs, what)
    check_input_values(inputs, specs, what, declared_bounds(specs) if bounds is None else bounds)
    rows = len(next(iter(inputs.values())))
    targets = {k: v for k, v in arrays.items() if k not in specs}  # labels: `labels` and any other array
    for name, value in targets.items():
        if value.ndim == 0 or len(value) != rows:
            raise ModelFileError(f"{what}: {name!r} has shape {value.shape}; a label array has one row per input row "
                                 f"({rows}), and it is no input of the model ({', '.join(specs)})")  # fmt: skip
    labels = targets.pop(LABELS, None)
    return DataSet(inputs, labels=labels, origin=str(path), extra=targets)
