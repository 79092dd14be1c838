"""The variants' knobs: each pass's `Config` (a pydantic model) validates its variant's params.yaml
section (`variants.<name>`, `machine_variants.<name>`, `gpu_variants.<name>`) and each model's
`overrides` of it, naming the file and the field of a mistake in one line.

The registry names every pass by module path (pipeline.core.registry) and never imports one; this
is where passes are imported, by what builds: `python -m pipeline check` and the plan stage check
every variant once, the build stage the variant it builds. pipeline.core.config checks the rest of
params.yaml, variant names included, without importing any pass. Pass modules import their
frameworks inside `run`, so reading a `Config` costs no framework import.
"""

from __future__ import annotations

import importlib

from pydantic import BaseModel

from pipeline.core import registry
from pipeline.core.config import Params
from pipeline.core.layout import PARAMS_FILE
from pipeline.core.validation import validate
from pipeline.optimize.passes.base import Pass


def pass_class(variant: str | registry.Variant) -> type[Pass]:
    """The Pass class that builds `variant` (a name or a registry entry)."""
    spec = registry.get(variant) if isinstance(variant, str) else variant
    module, _, name = spec.pass_ref.partition(":")
    found = getattr(importlib.import_module(module), name)
    if not (isinstance(found, type) and issubclass(found, Pass)):
        raise TypeError(f"pipeline/core/registry.py: {spec.name}: {spec.pass_ref} is not a Pass")
    return found


def validate_variant_params(name: str, data: dict, source: str = PARAMS_FILE, section: str = "variants") -> BaseModel:
    """Check variant `name`'s knobs `data` (found under `section.<name>` of `source`) with its pass's Config."""
    return validate(pass_class(registry.get(name, source, section)).Config, data, source, prefix=f"{section}.{name}")


def variant_config(params: Params, name: str, model: str | None = None, source: str = PARAMS_FILE) -> BaseModel:
    """The checked knobs variant `name` builds `model` with: its section, then `model`'s overrides of it."""
    params.variant_params(name)  # a variant that is built must be configured
    config = validate_variant_params(name, params.all_variants[name] or {}, source, params.group_of(name))
    if model is not None and name in params.model(model).overrides:
        merged = params.variant_params(name, model)
        config = validate_variant_params(name, merged, source, f"catalog.{model}.overrides")
    return config


def check_variant_params(params: Params, source: str = PARAMS_FILE) -> None:
    """Every configured variant's knobs and every model's overrides of them; the first mistake
    raises a ConfigError ('file: dotted.field: message')."""
    for name in params.all_variants:
        variant_config(params, name, None, source)
    for model, config in params.catalog.items():
        for name in config.overrides:
            variant_config(params, name, model, source)
