"""What the user passed to `python -m pipeline add` besides NAME and PATH (`Flags`), and the parsing
of the flags that are NAME=V pairs (--dim, --value, --batch-axis, --output-rows) into it, one line for a
bad one."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.prepare.add.axes import symbol_of
from pipeline.prepare.add.inferred import AddError


@dataclass(frozen=True)
class Flags:
    """What the user passed besides NAME and PATH (the command's flags)."""

    eval: Path | None = None  # held-out rows: an .npz, or text for a text model
    dims: dict[str, int] = field(default_factory=dict)  # --dim: symbolic axes' values
    vocab: int | None = None  # --vocab: token ids' bound, when no file tells it
    metric: str | None = None  # with labelled --eval: a built-in name, or FILE.py:FUNCTION of the user's
    task: str | None = None  # Hugging Face folders
    weights: Path | None = None  # code models: the state_dict / msgpack file
    sample: Path | None = None  # code models: an .npz whose arrays give the inputs
    inputs: tuple[str, ...] = ()  # code models: NAME=D1,D2[:DTYPE] per input
    values: dict[str, float] = field(default_factory=dict)  # --value: scalar inputs' values
    batch_axes: dict[str, int] = field(default_factory=dict)  # --batch-axis: inputs whose batch axis is not first
    output_rows: dict[str, int] = field(default_factory=dict)  # --output-rows: outputs' rows axes the file hides
    thresholds: dict[str, float] = field(default_factory=dict)  # --threshold: outputs' decision thresholds
    judged_as: dict[str, str] = field(default_factory=dict)  # --judged-as: outputs' kinds
    trust_pickle: bool = False  # --trust-pickle: a scikit-learn pickle may be loaded (it runs code from the file)
    tolerances: dict[str, float] = field(default_factory=dict)  # --tolerance: how far a points output's point may move


def parse_assignments(flag: str, values: list[str], kind: type) -> dict[str, Any]:
    """NAME=V flags (--value sr=16000, --batch-axis state=1, --output-rows 387=1) as {NAME: V}; one line
    for a bad one."""
    found = {}
    for value in values:
        name, _, number = value.rpartition("=")
        try:
            found[name] = kind(number)
        except ValueError:
            found[name] = None
        if not name or found[name] is None or (kind is int and found[name] < 0):
            raise AddError(
                f"{flag} {value}: expected NAME={'K (an axis, 0 or more)' if kind is int else 'V (a number)'}"
            )
    return found


def parse_dims(values: list[str]) -> dict[str, int]:
    """--dim seq=128 flags as {seq: 128}; an axis may be given by the file's own name, whatever its
    characters (`--dim p2o.DynamicDimension.1=320`), or by the entry's (symbol_of)."""
    dims = {}
    for value in values:
        axis, _, number = value.rpartition("=")
        symbol = symbol_of(axis)
        if symbol is None or not number.isdigit() or int(number) < 1:
            raise AddError(f"--dim {value}: expected AXIS=N with an axis name and a positive N (e.g. seq=128)")
        dims[symbol] = int(number)
    return dims
