"""params.yaml checked against the registry's tables: what the schema (pipeline.core.config) leaves
out so that reading params.yaml imports no table. Variant names and the group each is listed in
(variants, machine_variants, gpu_variants), each catalog entry's `skip` list, and the runtimes the
select constraints allow. Every mistake ends in one line naming the file and the field.

Asked wherever variants are planned: `python -m pipeline check`, `python -m pipeline stages` (the
stage files) and the plan stage, the first `dvc repro` runs; the build stage looks its variant up
by name (pipeline.core.registry.get), which names an unknown one the same way.
"""

from __future__ import annotations

from pipeline.core import registry
from pipeline.core.config import VARIANT_GROUPS, Params
from pipeline.core.errors import ConfigError
from pipeline.core.layout import PARAMS_FILE


def check_variant_lists(params: Params, path: str = PARAMS_FILE) -> None:
    """Raise a ConfigError ('file: dotted.field: message') at the first entry of `params` (read from
    `path`) that names what the registry does not have, or lists a variant in the wrong group."""
    for group in VARIANT_GROUPS:
        for name in getattr(params, group):
            variant = registry.get(name, path, group)
            if group == "gpu_variants" and variant.device != "cuda":
                raise ConfigError(f"{path}: gpu_variants.{name}: runs on {variant.device}: list it elsewhere")
            if group != "gpu_variants" and variant.device == "cuda":
                raise ConfigError(f"{path}: {group}.{name}: a GPU variant: list it under gpu_variants")
            if group == "variants" and variant.per_target:
                raise ConfigError(
                    f"{path}: variants.{name}: its artifact depends on the machine that builds it "
                    "(native code, an engine, an ISA-chosen recipe): list it under machine_variants"
                )
    for model, config in params.catalog.items():
        for i, name in enumerate(config.skip):
            if name not in registry.VARIANTS:
                known = ", ".join(registry.VARIANTS)
                raise ConfigError(f"{path}: catalog.{model}.skip.{i}: {name!r} is not a variant (known: {known})")
    allowed = {"select.constraints": params.select.constraints.runtimes}
    allowed |= {
        f"select.models.{model}": params.select.constraints_for(model).runtimes for model in params.select.models
    }
    for where, names in allowed.items():
        for i, name in enumerate(names or []):
            if name not in registry.RUNTIMES:
                known = ", ".join(registry.RUNTIMES)
                raise ConfigError(f"{path}: {where}.runtimes.{i}: {name!r} is not a runtime (known: {known})")
