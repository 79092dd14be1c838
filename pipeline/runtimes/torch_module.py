"""A PyTorch model as code plus weights: built the same way by the torch source (export) and the
torch runtime (torch_eager, predict), so the eager baseline is exactly the exported model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from pipeline.core.errors import ConfigError, ModelFileError, first_line, one_line
from pipeline.core.layout import PARAMS_FILE
from pipeline.core.model_code import import_object
from pipeline.core.rescues import BY_NAME

# where training scripts keep the model's state in a checkpoint dict, most common first
CHECKPOINT_KEYS = ("state_dict", "model_state_dict", "model_state", "model", "net", "network", "module")
WRAPPER_PREFIXES = ("module.", "model.", "_orig_mod.")  # DataParallel / DDP, a Lightning module, torch.compile


def build_module(
    factory_ref: str,
    factory_args: dict[str, Any],
    weights: Path | None,
    root: Path,
    field: str,
    init_seed: int = 0,
    rescued: list[dict[str, Any]] | None = None,
) -> torch.nn.Module:
    """Instantiate the factory and load the weights; shared by the source and the torch runtime.

    Without a weights file the factory's own initialisation is used, seeded: an architecture
    benchmarked for speed (like Keras' weights=None), measured for fidelity to itself. A training
    script's checkpoint dict is read by its usual keys (rescue checkpoint_dict, appended to `rescued`).
    """
    factory = import_object(factory_ref, root, f"{field}.factory")
    torch.manual_seed(init_seed)
    try:
        module = factory(**factory_args)
    except Exception as error:
        raise ConfigError(f"{PARAMS_FILE}: {field}.factory: calling {factory_ref} failed: {one_line(error)}") from None
    if not isinstance(module, torch.nn.Module):
        raise ConfigError(f"{PARAMS_FILE}: {field}.factory: returned {type(module).__name__}, expected torch.nn.Module")
    if weights is None:
        return module.eval()
    try:
        state = torch.load(weights, map_location="cpu", weights_only=True)
    except Exception as error:
        raise ModelFileError(
            f"{weights}: not a readable PyTorch state_dict ({PARAMS_FILE}: {field}.file): "
            f"{type(error).__name__}: {first_line(error)}"
        ) from None
    try:
        module.load_state_dict(state)
    except (RuntimeError, TypeError, AttributeError) as error:
        found = checkpoint_state(state, module)
        if found is None:
            raise ModelFileError(
                f"{weights}: does not fit {factory_ref} ({PARAMS_FILE}: {field}.file): {one_line(error)}"
            ) from None
        inner, where = found
        module.load_state_dict(inner)
        if rescued is not None:
            rescued.append(BY_NAME["checkpoint_dict"].record(error, used=where))
    return module.eval()


def checkpoint_state(state: Any, module: torch.nn.Module) -> tuple[dict[str, Any], str] | None:
    """The module's state dict inside a training checkpoint (`{"step": ..., "model_state": ...,
    "optimizer_state": ...}`), under one of CHECKPOINT_KEYS and without a wrapper's prefix, and where it
    was found; None when no entry holds every one of the module's keys. Tensors under that key that the
    module has not (a training loss's own parameters, as Resemblyzer's GE2E similarity_weight and
    similarity_bias: its package loads them with strict=False) are left out, and named in where."""
    if not isinstance(state, dict):
        return None
    wanted = set(module.state_dict())
    entries = [(None, state)] + [(key, state[key]) for key in CHECKPOINT_KEYS if isinstance(state.get(key), dict)]
    for key, entry in entries:
        for prefix in ("", *WRAPPER_PREFIXES):
            inner = {name.removeprefix(prefix): value for name, value in entry.items() if isinstance(name, str)}
            extra = sorted(set(inner) - wanted)
            if key is None and extra:  # the top level is the state dict itself, or not at all
                continue
            if wanted <= set(inner) and (not prefix or all(name.startswith(prefix) for name in entry)):
                place = f"key {key!r}" if key else "the top level"
                left = f", {', '.join(extra)} left out (not the module's)" if extra else ""
                return {n: inner[n] for n in wanted}, place + (f", prefix {prefix!r} removed" if prefix else "") + left
    return None


def flat_outputs(result: Any) -> tuple[list[str], list[torch.Tensor]]:
    """The model's output tensors in torch.export's (pytree) order, with stable names.

    A tensor is `output`; a tuple gives `output0`, `output1`; dict keys (and Hugging Face
    ModelOutput fields) give their own names; nesting joins them with '_' (`output0_1`).
    """
    from torch.utils import _pytree

    leaves = [
        (path, leaf) for path, leaf in _pytree.tree_flatten_with_path(result)[0] if isinstance(leaf, torch.Tensor)
    ]
    names = []
    for path, _ in leaves:
        parts = [str(getattr(key, "key", getattr(key, "idx", getattr(key, "name", key)))) for key in path]
        if not parts or parts[0].isdigit():
            parts = ["output" + (parts[0] if parts else ""), *parts[1:]]
        names.append("_".join(parts))
    return names, [leaf for _, leaf in leaves]


def as_tuple(result: Any) -> tuple[torch.Tensor, ...]:
    return tuple(flat_outputs(result)[1])
