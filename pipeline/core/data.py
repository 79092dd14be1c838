"""Model input data: the user's .npz files, generated inputs, and the reference sets we save.

A user's eval or calibration file is an .npz with one array per model input (named as in the
input spec) and, for eval data, an optional `labels` array. Everything is checked against the
input spec here, with errors that name the file and the params.yaml field.
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

import numpy as np

from pipeline.core.config import PARAMS_FILE, InputSpec
from pipeline.core.errors import ConfigError, ModelFileError

Arrays = dict[str, np.ndarray]
LABELS = "labels"
# Inputs an embedding looks up, and what their bound is called in errors.
ID_KINDS = {"token_ids": ("token ids", "the vocabulary"), "token_type_ids": ("token type ids", "the type vocabulary")}


@dataclass
class DataSet:
    """Inputs (by input name), optional outputs of the FP32 source (by output name) and labels."""

    inputs: Arrays
    outputs: Arrays = field(default_factory=dict)
    labels: np.ndarray | None = None
    origin: str = ""  # where the inputs came from, recorded in the metrics

    def __len__(self) -> int:
        return len(next(iter(self.inputs.values())))

    def head(self, n: int) -> DataSet:
        return DataSet(
            inputs={k: v[:n] for k, v in self.inputs.items()},
            outputs={k: v[:n] for k, v in self.outputs.items()},
            labels=None if self.labels is None else self.labels[:n],
            origin=self.origin,
        )

    def take(self, rows: np.ndarray, origin: str) -> DataSet:
        return DataSet(
            inputs={k: v[rows] for k, v in self.inputs.items()},
            outputs={k: v[rows] for k, v in self.outputs.items()},
            labels=None if self.labels is None else self.labels[rows],
            origin=origin,
        )

    def split(self, fractions: dict[str, float], seed: int) -> dict[str, DataSet]:
        """Disjoint subsets of the rows, a seeded permutation cut at the fractions; the rows left
        over form `rest`. Every part keeps at least one row."""
        order = np.random.default_rng(seed).permutation(len(self))
        if len(self) < len(fractions) + 1:
            raise ConfigError(f"{self.origin}: {len(self)} rows cannot be split into {[*fractions, 'rest']}")
        parts, start = {}, 0
        for role, fraction in fractions.items():
            end = start + max(1, round(fraction * len(self)))
            parts[role] = order[start:end]
            start = end
        parts["rest"] = order[start:]
        return {
            role: self.take(
                np.sort(rows), f"{self.origin}: {len(rows)} of {len(self)} rows ({role}, split seed {seed})"
            )
            for role, rows in parts.items()
        }

    def save(self, path: Path) -> None:
        """Save as .npz; names are stored beside the arrays because they may not be valid keys."""
        arrays: dict[str, np.ndarray] = {
            "input_names": np.array(list(self.inputs), dtype=str),
            "output_names": np.array(list(self.outputs), dtype=str),
            "origin": np.array(self.origin),
        }
        arrays |= {f"input_{i}": v for i, v in enumerate(self.inputs.values())}
        arrays |= {f"output_{i}": v for i, v in enumerate(self.outputs.values())}
        if self.labels is not None:
            arrays[LABELS] = self.labels
        with path.open("wb") as f:
            np.savez(f, **arrays)

    @classmethod
    def load(cls, path: Path) -> DataSet:
        with np.load(path, allow_pickle=False) as z:
            inputs = {str(n): z[f"input_{i}"] for i, n in enumerate(z["input_names"])}
            outputs = {str(n): z[f"output_{i}"] for i, n in enumerate(z["output_names"])}
            labels = z[LABELS] if LABELS in z.files else None
            return cls(inputs, outputs, labels, str(z["origin"]))


def rows_in(rows: Arrays, pool: Arrays) -> int:
    """How many of `rows` also occur (every input equal) in `pool`: held-out sets must have none."""

    def keys(arrays: Arrays) -> list[bytes]:
        flat = [np.ascontiguousarray(v).reshape(len(v), -1).view(np.uint8) for v in arrays.values()]
        return [b"".join(part[i].tobytes() for part in flat) for i in range(len(flat[0]))]

    seen = set(keys(pool))
    return sum(key in seen for key in keys(rows))


def batches(arrays: Arrays, size: int) -> Iterator[Arrays]:
    n = len(next(iter(arrays.values())))
    for start in range(0, n, size):
        yield {k: v[start : start + size] for k, v in arrays.items()}


def sample_batch(inputs: Arrays, batch: int) -> Arrays:
    """The first `batch` rows (repeated if there are fewer): real data, fixed."""
    n = len(next(iter(inputs.values())))
    index = np.arange(batch) % n
    return {k: np.ascontiguousarray(v[index]) for k, v in inputs.items()}


def padded_batches(arrays: Arrays, size: int) -> Iterator[tuple[Arrays, int]]:
    """Batches of exactly `size` rows, for models that fix their batch axis: the last one is
    filled up by repeating its last row. Yields (batch, how many of its rows are real)."""
    for chunk in batches(arrays, size):
        real = len(next(iter(chunk.values())))
        if real < size:
            chunk = {k: np.concatenate([v, np.repeat(v[-1:], size - real, axis=0)]) for k, v in chunk.items()}
        yield chunk, real


def run_batched(run: Callable[[Arrays], Arrays], inputs: Arrays, size: int, fixed: bool = False) -> Arrays:
    """`run` over `inputs` in batches of `size` (exactly `size` when the model fixes its batch)."""
    if not fixed:
        return concat([run(chunk) for chunk in batches(inputs, size)])
    return concat([{k: v[:real] for k, v in run(chunk).items()} for chunk, real in padded_batches(inputs, size)])


def concat(chunks: list[Arrays]) -> Arrays:
    return {k: np.concatenate([c[k] for c in chunks]) for k in chunks[0]}


def generate_inputs(
    specs: dict[str, InputSpec],
    n: int,
    seed: int,
    dims: dict[str, int] | None = None,
    vocab_size: int | None = None,
    field: str = "catalog.<model>",
) -> Arrays:
    """Deterministic inputs from the spec alone, shaped with `dims` for symbolic dimensions.

    Values follow each input's `kind`: N(0, 1) floats or uniform values in [low, high) for plain
    values; token ids, attention masks and token type ids shaped like a tokenizer's output, with
    padded positions (mask 0) holding token id 0 (the usual [PAD]).
    """
    rng = np.random.default_rng(seed)
    out: Arrays = {}
    masks = [name for name, spec in specs.items() if spec.kind == "attention_mask"]
    for name, spec in sorted(specs.items(), key=lambda item: item[1].kind != "attention_mask"):
        shape = spec.shape_for(n, dims)
        dtype = np.dtype(spec.dtype)
        if spec.scalar:  # the one value every call passes, held once per row
            out[name] = np.full(n, spec.value, dtype=dtype)
        elif spec.kind == "attention_mask":
            out[name] = _attention_mask(rng, shape, int(spec.low or 1)).astype(dtype)
        elif spec.kind == "token_ids":
            high = int(spec.high) if spec.high is not None else vocab_size
            if high is None:
                raise ConfigError(
                    f"{PARAMS_FILE}: {field}.inputs.{name}.high: token_ids need the vocabulary size "
                    "(the model exposes no config.vocab_size and no eval_data gives the ids)"
                )
            out[name] = rng.integers(int(spec.low or 0), high, size=shape, dtype=dtype)
        elif spec.kind == "token_type_ids":
            split = rng.integers(1, shape[1] + 1, size=(shape[0], 1)) * (rng.random((shape[0], 1)) < 0.5)
            out[name] = (np.arange(shape[1]) >= np.where(split > 0, split, shape[1])).astype(dtype)
        elif dtype == np.bool_:
            out[name] = rng.random(shape) < 0.5
        elif np.issubdtype(dtype, np.integer):
            low = int(spec.low) if spec.low is not None else 0
            high = int(spec.high) if spec.high is not None else 10
            out[name] = rng.integers(low, high, size=shape, dtype=dtype)
        elif spec.low is not None or spec.high is not None:
            low = spec.low if spec.low is not None else 0.0
            high = spec.high if spec.high is not None else 1.0
            out[name] = rng.uniform(low, high, size=shape).astype(dtype)
        elif dtype in (np.float32, np.float64):  # drawn in its own dtype: 4x faster than float64 then cast
            out[name] = rng.standard_normal(shape, dtype=dtype)
        else:
            out[name] = rng.standard_normal(shape).astype(dtype)
    if masks:
        attended = out[masks[0]].astype(bool)
        for name, spec in specs.items():
            if spec.kind in ("token_ids", "token_type_ids") and out[name].shape == attended.shape:
                out[name] = np.where(attended, out[name], 0).astype(out[name].dtype)
    return {name: out[name] for name in specs}


def _attention_mask(rng: np.random.Generator, shape: tuple[int, ...], minimum: int) -> np.ndarray:
    """1s for the first `length` positions of each row, lengths uniform in [minimum, full]."""
    full = shape[1]
    lengths = rng.integers(min(max(minimum, 1), full), full + 1, size=shape[0])
    mask = np.arange(full)[None, :] < lengths[:, None]
    return np.broadcast_to(mask.reshape(shape[0], full, *([1] * (len(shape) - 2))), shape)


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
    inputs = check_inputs(rows_first({k: v for k, v in arrays.items() if k != LABELS}, specs), specs, what)
    check_input_values(inputs, specs, what, declared_bounds(specs) if bounds is None else bounds)
    labels = arrays.get(LABELS)
    if labels is not None and len(labels) != len(next(iter(inputs.values()))):
        raise ModelFileError(f"{what}: 'labels' has {len(labels)} rows, inputs have {len(next(iter(inputs.values())))}")
    return DataSet(inputs, labels=labels, origin=str(path))
