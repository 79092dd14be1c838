"""jax_jit, jax_xla and torch_xla: JAX artifacts (jax_model.json + params.msgpack).

- jax_jit: the source's apply function under jax.jit; the artifact names the factory (code stays
  in models/<name>/), like torch_eager.
- jax_xla: jax.export of the jitted function with a symbolic batch axis: serialized StableHLO that
  loads without the model's code; loading deserializes and compiles.
- torch_xla: a PyTorch source converted to JAX by torchax, then exported as jax_xla. Skipped when
  torchax (optional) is not installed; failed, with the exception, when it is installed but
  crashes on import or cannot convert the model.

Parameters are Flax msgpack; the exported function takes them as a plain state dict, so that a
loader can restore them without the model's code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pipeline.core.errors import PipelineError, Unavailable, first_line
from pipeline.core.layout import model_dir
from pipeline.core.records import code_entry
from pipeline.core.records.code_entry import ArraySpec, CodeEntry
from pipeline.optimize.applicability import not_installed
from pipeline.optimize.passes.base import BuildContext, BuildResult, NoConfig, Pass

ENTRY = "jax_model.json"
PARAMS = "params.msgpack"
EXPORTED = "model.jaxexport"


def _write(ctx: BuildContext, kind: str, params_state: Any, **fields: Any) -> BuildResult:
    from flax import serialization

    (ctx.out_dir / PARAMS).write_bytes(serialization.msgpack_serialize(params_state))
    specs = {name: ArraySpec(shape=s.shape[1:], dtype=s.dtype) for name, s in ctx.config.inputs.items()}
    entry = CodeEntry(kind=kind, params=PARAMS, inputs=list(ctx.config.inputs), input_specs=specs,
                      outputs=ctx.source_info.output_names, **fields)  # fmt: skip
    code_entry.write(entry, ctx.out_dir / ENTRY)
    return BuildResult(ENTRY, {"kind": kind, **{k: v for k, v in fields.items() if k != "factory_args"}},
                       runtime_config={"compile_at_load": True})  # fmt: skip


def export_jax(ctx: BuildContext, apply: Callable[..., Any], params: Any, source: str) -> BuildResult:
    """jax.export with the spec's symbolic dimensions (shared by name across inputs), params as a state dict."""
    import jax
    from flax import serialization

    state = serialization.to_state_dict(params)

    def call(state: Any, *inputs: Any) -> Any:
        return apply(serialization.from_state_dict(params, state), *inputs)

    scope = jax.export.SymbolicScope()
    args = [
        jax.ShapeDtypeStruct(jax.export.symbolic_shape(", ".join(map(str, spec.shape)), scope=scope), spec.dtype)
        for spec in ctx.config.inputs.values()
    ]
    state_shapes = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), state)
    exported = jax.export.export(jax.jit(call))(state_shapes, *args)
    (ctx.out_dir / EXPORTED).write_bytes(exported.serialize())
    return _write(ctx, "export", state, exported=EXPORTED, converted_from=source,
                  platforms=", ".join(exported.platforms))  # fmt: skip


class JaxJit(Pass):
    def run(self, ctx: BuildContext, config: NoConfig) -> BuildResult:
        from flax import serialization

        from pipeline.prepare.sources.jaxfn import build_apply

        params_file = model_dir(ctx.model, ctx.root) / ctx.config.file if ctx.config.file else None
        _, params = build_apply(ctx.config, ctx.root, f"catalog.{ctx.model}", params_file)
        return _write(ctx, "jit", serialization.to_state_dict(params), factory=ctx.config.factory,
                      factory_args=ctx.config.factory_args)  # fmt: skip


class JaxXla(Pass):
    def run(self, ctx: BuildContext, config: NoConfig) -> BuildResult:
        from pipeline.prepare.sources.jaxfn import build_apply

        params_file = model_dir(ctx.model, ctx.root) / ctx.config.file if ctx.config.file else None
        apply, params = build_apply(ctx.config, ctx.root, f"catalog.{ctx.model}", params_file)
        return export_jax(ctx, apply, params, "jax")


class TorchXla(Pass):
    """PyTorch -> JAX with torchax (torchax.extract_jax), then as jax_xla."""

    def run(self, ctx: BuildContext, config: NoConfig) -> BuildResult:
        import torch

        try:
            import torchax
        except ModuleNotFoundError as error:
            if error.name != "torchax":
                raise PipelineError(f"torchax does not import: {first_line(error)}") from None
            raise Unavailable(not_installed(["torchax"])) from None
        except Exception as error:  # installed but broken: a failure to see, not a variant that does not apply
            raise PipelineError(
                f"torchax does not import with torch {torch.__version__}: {type(error).__name__}: {first_line(error)}"
            ) from None
        from pipeline.runtimes.torch_module import build_module

        weights = model_dir(ctx.model, ctx.root) / ctx.config.file if ctx.config.file else None
        module = build_module(ctx.config.factory or "", ctx.config.factory_args, weights, ctx.root,
                              f"catalog.{ctx.model}", ctx.config.init_seed)  # fmt: skip
        try:
            params, jax_fn = torchax.extract_jax(module)
        except Exception as error:
            raise PipelineError(
                f"torchax cannot convert {ctx.model}: {type(error).__name__}: {first_line(error)}"
            ) from None
        return export_jax(ctx, lambda p, *inputs: jax_fn(p, inputs), params, f"torch via torchax {torchax.__version__}")
