"""The entry file of an artifact that is code plus weights (torch_model.json, jax_model.json): which
factory builds the module or function, where its weights are, and its input and output names. Written
by the torch and JAX passes, read by their runtimes and by the deploy step (which copies the factory's
code beside the artifact), here only."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from pipeline.core.files import read_json, write_json
from pipeline.core.records.base import Part


class ArraySpec(Part):
    shape: list[int | str]  # one row's (no batch axis)
    dtype: str


class CodeEntry(Part):
    inputs: list[str]
    outputs: list[str]
    factory: str | None = None  # "module:function", imported from the code root
    factory_args: dict[str, Any] = Field(default_factory=dict)
    # torch
    weights: str | None = None  # a state_dict file beside the entry
    init_seed: int = 0
    package: str | None = None  # an AOTInductor package instead of a factory
    # JAX
    kind: Literal["jit", "export"] | None = None
    params: str | None = None  # msgpack parameters beside the entry
    exported: str | None = None  # a serialized jax.export
    input_specs: dict[str, ArraySpec] = Field(default_factory=dict)
    converted_from: str | None = None
    platforms: str | None = None


def write(entry: CodeEntry, path: Path) -> None:
    write_json(path, entry.model_dump(mode="json", exclude_defaults=True) | {"inputs": entry.inputs})


def load(path: Path) -> CodeEntry:
    return CodeEntry.model_validate(read_json(path))
