"""What `python -m pipeline add` reads off a model, whatever its kind: the entry it infers (`Inferred`),
the flags it was given (`Flags`), its one-line error, and the input axes every reader names alike."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.core.errors import PipelineError

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
TOKEN_NAMES = {  # an integer input whose name holds one of these: what its values are
    "token_type": "token_type_ids",
    "segment": "token_type_ids",
    "mask": "attention_mask",
    "ids": "token_ids",
    "tokens": "token_ids",
}
DEFAULT_DIM = 128  # a symbolic axis after the batch: the value generated inputs and batch-1 latency use


class AddError(PipelineError):
    """What `add` cannot take, in one line naming the path."""


@dataclass
class Inferred:
    """What was read off the model: its catalog entry, the files that make it, and what to tell."""

    entry: dict[str, Any]
    files: dict[str, Path]  # name inside models/NAME/ -> what is copied there (a file or a folder)
    tracked: list[str]  # of those, what `dvc add` versions (model weights; git keeps the rest)
    notes: list[str] = field(default_factory=list)
    scratch: list[Path] = field(default_factory=list)  # made while inferring (tokenized text): removed after


@dataclass(frozen=True)
class Flags:
    """What the user passed besides NAME and PATH (the command's flags)."""

    eval: Path | None = None  # held-out rows: an .npz, or text for a text model
    dims: dict[str, int] = field(default_factory=dict)  # --dim: symbolic axes' values
    vocab: int | None = None  # --vocab: token ids' bound, when no file tells it
    metric: str | None = None  # with labelled --eval
    task: str | None = None  # Hugging Face folders
    weights: Path | None = None  # code models: the state_dict / msgpack file
    sample: Path | None = None  # code models: an .npz whose arrays give the inputs
    inputs: tuple[str, ...] = ()  # code models: NAME=D1,D2[:DTYPE] per input


def axes_notes(path: Path, dims: dict[str, int], used: dict[str, int]) -> list[str]:
    """What each symbolic axis is set to, and from where; a `--dim` naming no axis is an error."""
    if unknown := sorted(set(dims) - set(used)):
        raise AddError(f"{path}: --dim {', '.join(unknown)}: no such symbolic axis (the file has {sorted(used)})")
    return [
        f"axis {symbol}: {value} for generated inputs and batch-1 latency "
        f"({'--dim' if symbol in dims else f'a default: pass --dim {symbol}=N for another'})"
        for symbol, value in used.items()
    ]


def token_kind(name: str, dtype: str) -> str:
    """What an input's values are, from its name, for integer inputs; `values` otherwise."""
    if not dtype.startswith("int"):
        return "values"
    lowered = name.lower()
    return next((kind for word, kind in TOKEN_NAMES.items() if word in lowered), "values")


def spec_shape(input_name: str, axes: list[Any], flags: dict[str, int], used: dict[str, int]) -> list[int | str]:
    """An input spec's shape from a file's axes (a positive int where fixed; else the file's symbol
    name, or None or 0 where it has none): the first open axis is `batch`, any other a symbol (the
    file's own when it is a name, else input_axis) recorded in `used` with its value (`--dim`, else
    DEFAULT_DIM)."""
    shape: list[int | str] = []
    for index, dim in enumerate(axes):
        if isinstance(dim, int) and dim > 0:
            shape.append(dim)
        elif index == 0:
            shape.append("batch")
        else:
            symbol = dim if isinstance(dim, str) and NAME.fullmatch(dim) else _axis_name(input_name, index)
            shape.append(symbol)
            used[symbol] = flags.get(symbol, DEFAULT_DIM)
    return shape


def _axis_name(input_name: str, index: int) -> str:
    return re.sub(r"\W", "_", f"{input_name}_{index}").strip("_") or f"axis_{index}"
