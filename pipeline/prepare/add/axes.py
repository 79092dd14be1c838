"""The input axes every `add` inspector names alike: a file's symbolic axes made entry names
(symbol_of), an input's shape in the entry (spec_shape) and what its values are (token_kind), and the
notes saying where each axis's value came from."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pipeline.prepare.add.inferred import AddError

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # a model's name, and an axis name as the entry writes it
TOKEN_NAMES = {  # an integer input whose name holds one of these: what its values are
    "token_type": "token_type_ids",
    "segment": "token_type_ids",
    "mask": "attention_mask",
    "ids": "token_ids",
    "tokens": "token_ids",
}
DEFAULT_DIM = 128  # a symbolic axis after the batch: the value generated inputs and batch-1 latency use


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
