"""Model input data: the user's .npz files, generated inputs, and the reference sets we save.

A user's eval or calibration file is an .npz with one array per model input (named as in the
input spec) and, for eval data, optional labels: `labels` (what the built-in task metrics read)
and any other array that is not an input (what a user's own metric may read: note targets, strings).
Everything is checked against the input spec here, with errors that name the file and the params.yaml field.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pipeline.core.config import PARAMS_FILE, InputSpec
from pipeline.core.errors import ConfigError

Arrays = dict[str, np.ndarray]
LABELS = "labels"


@dataclass
class DataSet:
    """Inputs (by input name), optional outputs of the FP32 source (by output name) and labels: `labels`,
    and `extra`, the eval file's other arrays that are not inputs, by name (rows first, as labels)."""

    inputs: Arrays
    outputs: Arrays = field(default_factory=dict)
    labels: np.ndarray | None = None
    origin: str = ""  # where the inputs came from, recorded in the metrics
    extra: Arrays = field(default_factory=dict)

    @property
    def targets(self) -> Arrays:
        """Every label array by name, what a task metric reads: `labels` and the extra ones."""
        return ({LABELS: self.labels} if self.labels is not None else {}) | self.extra

    def __len__(self) -> int:
        return len(next(iter(self.inputs.values())))

    def head(self, n: int) -> DataSet:
        return DataSet(
            inputs={k: v[:n] for k, v in self.inputs.items()},
            outputs={k: v[:n] for k, v in self.outputs.items()},
            labels=None if self.labels is None else self.labels[:n],
            origin=self.origin,
            extra={k: v[:n] for k, v in self.extra.items()},
        )

    def take(self, rows: np.ndarray, origin: str) -> DataSet:
        return DataSet(
            inputs={k: v[rows] for k, v in self.inputs.items()},
            outputs={k: v[rows] for k, v in self.outputs.items()},
            labels=None if self.labels is None else self.labels[rows],
            origin=origin,
            extra={k: v[rows] for k, v in self.extra.items()},
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
            "extra_names": np.array(list(self.extra), dtype=str),
        }
        arrays |= {f"input_{i}": v for i, v in enumerate(self.inputs.values())}
        arrays |= {f"output_{i}": v for i, v in enumerate(self.outputs.values())}
        arrays |= {f"extra_{i}": v for i, v in enumerate(self.extra.values())}
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
            names = z["extra_names"] if "extra_names" in z.files else []
            extra = {str(n): z[f"extra_{i}"] for i, n in enumerate(names)}
            return cls(inputs, outputs, labels, str(z["origin"]), extra)


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


def _texts(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Strings of 3 to 12 lower-case words of 2 to 9 letters: what a text input's generated rows hold (real
    words come with eval data)."""
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words = lambda: " ".join("".join(rng.choice(letters, rng.integers(2, 10))) for _ in range(rng.integers(3, 13)))  # noqa: E731
    return np.array([words() for _ in range(int(np.prod(shape)))], dtype=str).reshape(shape)


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
        elif dtype.kind == "U":  # text: words of letters, as a tokenizer or a vectorizer splits them
            out[name] = _texts(rng, shape)
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
