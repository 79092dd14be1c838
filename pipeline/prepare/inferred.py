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
    values: dict[str, float] = field(default_factory=dict)  # --value: scalar inputs' values
    batch_axes: dict[str, int] = field(default_factory=dict)  # --batch-axis: inputs whose batch axis is not first


def axes_notes(
    path: Path, dims: dict[str, int], used: dict[str, int], renamed: dict[str, str] | None = None
) -> list[str]:
    """What each symbolic axis is set to, and from where (the file's own name beside the entry's where
    it had to be renamed); a `--dim` naming no axis is an error."""
    renamed = renamed or {}
    if unknown := sorted(set(dims) - set(used)):
        named = sorted({renamed.get(s, s) for s in used})
        raise AddError(f"{path}: --dim {', '.join(unknown)}: no such symbolic axis (the file has {named})")
    return [
        f"axis {symbol}{f' (the file calls it {renamed[symbol]!r})' if symbol in renamed else ''}: {value} for "
        f"generated inputs and batch-1 latency "
        f"({'--dim' if symbol in dims else f'a default: pass --dim {renamed.get(symbol, symbol)}=N for another'})"
        for symbol, value in used.items()
    ]


def symbol_of(axis: str) -> str | None:
    """The entry's name for an axis the file names: the name itself when it is one (`seq`, `unk__12`),
    else its words joined by '_' (paddle2onnx's `p2o.DynamicDimension.1` -> `p2o_DynamicDimension_1`);
    None for a mark that names nothing (`?`, `-1`, an empty name): such an axis is its input's own."""
    if NAME.fullmatch(axis):
        return axis
    words = re.sub(r"\W+", "_", axis).strip("_")
    if not words or words.isdigit():
        return None
    return words if NAME.fullmatch(words) else f"_{words}"


def token_kind(name: str, dtype: str) -> str:
    """What an input's values are, from its name, for integer inputs; `values` otherwise."""
    if not dtype.startswith("int"):
        return "values"
    lowered = name.lower()
    return next((kind for word, kind in TOKEN_NAMES.items() if word in lowered), "values")


def spec_shape(
    input_name: str,
    axes: list[Any],
    flags: dict[str, int],
    used: dict[str, int],
    renamed: dict[str, str] | None = None,
    batch_axis: int = 0,
) -> list[int | str]:
    """An input spec's shape from a file's axes (a positive int where fixed; else the file's symbol
    name, or None, 0, -1 or a mark like `?` where it has none): the batch axis (the first unless
    `batch_axis` says) is `batch` when open, any other open axis a symbol (the file's own, made a name
    by symbol_of, noting the rename in `renamed`; else input_axis) recorded in `used` with its value
    (`--dim`, else DEFAULT_DIM). `flags` are keyed by the entry's names (parse_dims maps the file's)."""
    shape: list[int | str] = []
    for index, dim in enumerate(axes):
        if isinstance(dim, int) and dim > 0:
            shape.append(dim)
        elif index == batch_axis:
            shape.append("batch")
        else:
            symbol = (symbol_of(dim) if isinstance(dim, str) else None) or _axis_name(input_name, index)
            if isinstance(dim, str) and symbol != dim and symbol_of(dim) and renamed is not None:
                renamed[symbol] = dim
            shape.append(symbol)
            used[symbol] = flags.get(symbol, DEFAULT_DIM)
    return shape


def _axis_name(input_name: str, index: int) -> str:
    return re.sub(r"\W", "_", f"{input_name}_{index}").strip("_") or f"axis_{index}"
