"""`add` reading a model that is code, `FILE.py:FUNCTION`: a PyTorch factory returning an `nn.Module`,
or a JAX one returning `(apply_fn, params)` (the source kind is what it returns), with `--weights` (a
`state_dict` file; a Flax msgpack; none: the factory's own seeded initialisation). No file says a code
model's input shapes, so `--sample rows.npz` (one array per input, batch first: names, dtypes and the
axes after the batch) or `--input NAME=D1,D2[:DTYPE]` per input gives them, and the error without
either names both. The .py file is copied alone into models/NAME/ (a package: the factory becomes
`models.NAME.<stem>:FUNCTION`); `add` then builds the model, loads the weights and runs an example, as
the export stage will (pipeline.prepare.add.transaction), so a factory that does not fit its weights
fails there, in one line, before anything is kept.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import tempfile
from pathlib import Path

from pipeline.core.errors import first_line
from pipeline.prepare.add.axes import DEFAULT_DIM, axes_notes, token_kind
from pipeline.prepare.add.flags import Flags
from pipeline.prepare.add.inferred import AddError, Entry, Inferred, Input

CODE = re.compile(r"(?P<file>.+\.py):(?P<function>[A-Za-z_]\w*)")
INPUT_FLAG = re.compile(r"(?P<name>[^=]+)=(?P<dims>[\w,]*)(:(?P<dtype>\w+))?")


def reads(path: Path) -> bool:
    return CODE.fullmatch(str(path)) is not None


def inspect_code(name: str, reference: Path, flags: Flags) -> Inferred:
    """The entry of a factory in a .py file: its source kind from what it returns, inputs from the flags."""
    match = CODE.fullmatch(str(reference))
    assert match is not None
    file, function = Path(match["file"]), match["function"]
    if not file.is_file():
        raise AddError(f"{file}: not found")
    kind = _kind_returned(file, function)
    weights = flags.weights.resolve() if flags.weights else None
    if weights is not None and not weights.is_file():
        raise AddError(f"{weights}: not found (--weights)")
    if kind == "jax" and weights is not None and weights.suffix != ".msgpack":
        raise AddError(f"{weights}: a JAX factory's parameters are read from a Flax msgpack file (.msgpack)")
    inputs, used_dims, notes = declared_inputs(str(reference), flags)
    package = Path(tempfile.mkdtemp(prefix="add-code-")) / "__init__.py"
    package.write_text("")
    files = {file.name: file, "__init__.py": package} | ({weights.name: weights} if weights else {})
    entry = Entry(kind, factory=f"models.{name}.{file.stem}:{function}", inputs=inputs, dims=used_dims)
    entry.file, entry.init_seed = (weights.name, None) if weights else (None, 0)
    notes.append(f"{file.name} copied alone into models/{name}/: a module it imports must be installed or copied too")
    if weights is None:
        notes.append("no --weights: the factory's own initialisation, seeded (init_seed: 0)")
    return Inferred(entry, files, [weights.name] if weights else [], notes, scratch=[package.parent])


def _kind_returned(file: Path, function: str) -> str:
    """torch or jax: what the factory returns, called once (seeded) from the user's file."""
    spec = importlib.util.spec_from_file_location(f"_added_{file.stem}", file)
    try:
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    except Exception as error:
        raise AddError(f"{file}: importing it failed: {first_line(error)}") from None
    factory = getattr(module, function, None)
    if not callable(factory):
        raise AddError(f"{file}: no function {function!r} in it")
    if "torch" in sys.modules:
        sys.modules["torch"].manual_seed(0)
    try:
        built = factory()
    except Exception as error:
        raise AddError(f"{file}:{function}: calling it failed: {first_line(error)}") from None
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(built, torch.nn.Module):
        return "torch"
    if isinstance(built, tuple) and len(built) == 2 and callable(built[0]):
        return "jax"
    raise AddError(
        f"{file}:{function}: returned {type(built).__name__}; `add` takes a factory returning a torch.nn.Module "
        "or (apply_fn, params) (JAX)"
    )


def declared_inputs(where: str, flags: Flags) -> tuple[dict[str, Input], dict[str, int], list[str]]:
    """Input specs from `--sample` (its arrays, batch first) or `--input` flags; symbols take `--dim`."""
    import numpy as np

    from pipeline.core.config import InputSpec

    used: dict[str, int] = {}
    if flags.sample is not None:
        try:
            with np.load(flags.sample) as data:
                arrays = {key: data[key] for key in data.files if key != "labels"}
        except (OSError, ValueError) as error:
            raise AddError(f"{flags.sample}: not an .npz of input arrays (--sample): {first_line(error)}") from None
        axes = {key: (str(a.dtype), ["batch", *a.shape[1:]]) for key, a in arrays.items() if a.ndim >= 1}
        if not axes:
            raise AddError(f"{flags.sample}: no input arrays in it (--sample)")
        how = f"--sample {flags.sample.name}"
    elif flags.inputs:
        axes = {}
        for flag in flags.inputs:
            match = INPUT_FLAG.fullmatch(flag)
            if match is None:
                raise AddError(f"--input {flag}: expected NAME=D1,D2[:DTYPE] (the axes after the batch, e.g. x=32)")
            dims = [int(d) if d.isdigit() else d for d in match["dims"].split(",") if d]
            axes[match["name"]] = (match["dtype"] or "float32", ["batch", *dims])
            for symbol in dims:
                if isinstance(symbol, str):
                    used[symbol] = flags.dims.get(symbol, DEFAULT_DIM)
        how = "--input"
    else:
        raise AddError(
            f"{where}: code does not say its input shapes: pass --sample rows.npz (one array per input, batch first) "
            "or --input NAME=D1,D2[:DTYPE] for each input (e.g. --input x=32)"
        )
    inputs, notes = {}, [f"inputs from {how}: {', '.join(axes)}"]
    for name, (dtype, shape) in axes.items():
        spec = Input(shape, dtype)
        if (kind := token_kind(name, dtype)) != "values" and len(shape) >= 2:
            spec.kind = kind
            if kind != "attention_mask":
                if flags.vocab is None:
                    raise AddError(f"{where}: input {name!r} holds token ids: pass --vocab N (their vocabulary size)")
                spec.high = flags.vocab if kind == "token_ids" else 2
        try:
            InputSpec.model_validate(spec.as_yaml())
        except ValueError as error:
            raise AddError(f"{where}: input {name!r} {spec.as_yaml()}: {first_line(error)}") from None
        inputs[name] = spec
    return inputs, used, notes + axes_notes(Path(where), flags.dims, used)
