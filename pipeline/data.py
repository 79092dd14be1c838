"""Model input data: the user's .npz files, generated inputs, and the reference sets we save.

A user's eval or calibration file is an .npz with one array per model input (named as in the
input spec) and, for eval data, an optional `labels` array. Everything is checked against the
input spec here, with errors that name the file and the params.yaml field.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pipeline.config import PARAMS_FILE, InputSpec
from pipeline.errors import ModelFileError

Arrays = dict[str, np.ndarray]
LABELS = "labels"


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


def batches(arrays: Arrays, size: int) -> Iterator[Arrays]:
    n = len(next(iter(arrays.values())))
    for start in range(0, n, size):
        yield {k: v[start : start + size] for k, v in arrays.items()}


def concat(chunks: list[Arrays]) -> Arrays:
    return {k: np.concatenate([c[k] for c in chunks]) for k in chunks[0]}


def generate_inputs(specs: dict[str, InputSpec], n: int, seed: int) -> Arrays:
    """Deterministic inputs from the spec alone: N(0, 1) floats, or uniform values in [low, high)."""
    rng = np.random.default_rng(seed)
    out: Arrays = {}
    for name, spec in specs.items():
        shape = spec.shape_for(n)
        dtype = np.dtype(spec.dtype)
        if dtype == np.bool_:
            out[name] = rng.random(shape) < 0.5
        elif np.issubdtype(dtype, np.integer):
            low = int(spec.low) if spec.low is not None else 0
            high = int(spec.high) if spec.high is not None else 10
            out[name] = rng.integers(low, high, size=shape, dtype=dtype)
        elif spec.low is not None or spec.high is not None:
            low = spec.low if spec.low is not None else 0.0
            high = spec.high if spec.high is not None else 1.0
            out[name] = rng.uniform(low, high, size=shape).astype(dtype)
        else:
            out[name] = rng.standard_normal(shape).astype(dtype)
    return out


def check_inputs(arrays: Arrays, specs: dict[str, InputSpec], what: str) -> Arrays:
    """Check names, shapes (after the batch axis) and dtypes against the spec; cast safe dtypes."""
    checked: Arrays = {}
    sizes = set()
    for name, spec in specs.items():
        if name not in arrays:
            raise ModelFileError(
                f"{what}: missing array {name!r} (input names: {', '.join(specs)}; got: {', '.join(arrays)})"
            )
        value = arrays[name]
        expected = tuple(spec.shape[1:])
        if value.ndim != len(spec.shape) or tuple(value.shape[1:]) != expected:
            raise ModelFileError(
                f"{what}: array {name!r} has shape {value.shape}, expected (N, {', '.join(map(str, expected))})"
            )
        if not np.can_cast(value.dtype, np.dtype(spec.dtype), casting="same_kind"):
            raise ModelFileError(f"{what}: array {name!r} has dtype {value.dtype}, expected {spec.dtype}")
        checked[name] = value.astype(spec.dtype, copy=False)
        sizes.add(len(value))
    if len(sizes) != 1 or 0 in sizes:
        raise ModelFileError(f"{what}: inputs must have the same, non-zero number of samples (got {sorted(sizes)})")
    return checked


def load_user_data(path: Path, specs: dict[str, InputSpec], field_name: str) -> DataSet:
    """Read a user's .npz (inputs by name + optional labels); errors name the file and the field."""
    what = f"{path} ({PARAMS_FILE}: {field_name})"
    if not path.is_file():
        raise ModelFileError(f"{what}: file not found")
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except (OSError, ValueError, zipfile.BadZipFile) as error:
        raise ModelFileError(f"{what}: not a readable .npz file ({error})") from None
    inputs = check_inputs({k: v for k, v in arrays.items() if k != LABELS}, specs, what)
    labels = arrays.get(LABELS)
    if labels is not None and len(labels) != len(next(iter(inputs.values()))):
        raise ModelFileError(f"{what}: 'labels' has {len(labels)} rows, inputs have {len(next(iter(inputs.values())))}")
    return DataSet(inputs, labels=labels, origin=str(path))
