"""torch_eager and torch_compile: the PyTorch source, as is and compiled ahead of time; lm_torch: a
text-generation model's Hugging Face folder, run by transformers.

Both artifacts have the entry torch_model.json (input and output names, and what to load).

- torch_eager, the baseline every ratio is taken against: the state_dict and the factory that
  builds the module; the factory's code stays in models/<name>/ (an eager model cannot run without
  it). A model without a weights file gets the state_dict of its seeded initialisation saved.
- torch_compile (torch_compile_cuda on a GPU target): an AOTInductor package (model.pt2).
  Measured here on digits_cnn: torch.compile pays ~20 s of compilation at the first call of every
  new process and ran slower than eager (56 vs 49 us); the AOTInductor package compiles once at
  build time, loads in milliseconds and ran at 29 us. The package holds native code for its
  target's hardware; builds rerun when the fingerprint changes.
"""

from __future__ import annotations

import shutil
from typing import Any

from pipeline.core.layout import HF_DIR, model_dir
from pipeline.core.records import code_entry
from pipeline.core.records.code_entry import CodeEntry
from pipeline.optimize.passes.base import BuildContext, BuildResult, NoConfig, Pass

ENTRY = "torch_model.json"
WEIGHTS = "weights.pt"
PACKAGE = "model.pt2"


def _write(ctx: BuildContext, **fields: Any) -> None:
    entry = CodeEntry(inputs=list(ctx.config.inputs), outputs=ctx.source_info.output_names, **fields)
    code_entry.write(entry, ctx.out_dir / ENTRY)


def source_module(ctx: BuildContext) -> Any:
    from pipeline.runtimes.torch_module import build_module

    weights = model_dir(ctx.model, ctx.root) / ctx.config.file if ctx.config.file else None
    return build_module(
        ctx.config.factory or "",
        ctx.config.factory_args,
        weights,
        ctx.root,
        f"catalog.{ctx.model}",
        ctx.config.init_seed,
    )


class TorchEager(Pass):
    """The weights always travel in the artifact: copied from the model's file, or the seeded
    initialisation's state_dict saved (so `size_mb` is the model's size, and a deployed artifact
    does not depend on re-running the seeded initialisation)."""

    def run(self, ctx: BuildContext, config: NoConfig) -> BuildResult:
        import torch

        if ctx.config.file:
            shutil.copy2(model_dir(ctx.model, ctx.root) / ctx.config.file, ctx.out_dir / WEIGHTS)
            origin = f"copied from {ctx.config.file}"
        else:
            torch.save(source_module(ctx).state_dict(), ctx.out_dir / WEIGHTS)
            origin = f"state_dict of the factory's initialisation (init_seed {ctx.config.init_seed})"
        _write(
            ctx,
            factory=ctx.config.factory,
            factory_args=ctx.config.factory_args,
            weights=WEIGHTS,
            init_seed=ctx.config.init_seed,
        )
        return BuildResult(ENTRY, {"factory": ctx.config.factory, "weights": origin})


def takes_varargs(module: Any) -> bool:
    """Whether the module's forward takes its inputs as *args: torch.export then matches dynamic_shapes
    to that one parameter, a tuple ("inputs has 1 elements, but dynamic_shapes has 3")."""
    import inspect

    kinds = [p.kind for p in inspect.signature(module.forward).parameters.values()]
    return kinds == [inspect.Parameter.VAR_POSITIONAL]


class TorchCompile(Pass):
    def run(self, ctx: BuildContext, config: NoConfig) -> BuildResult:
        import torch

        from pipeline.prepare.sources.pytorch import dynamic_shapes

        device = torch.device(ctx.target)  # torch_compile_cuda: kernels generated for the GPU
        module = source_module(ctx).to(device)
        example = tuple(torch.from_numpy(v).to(device) for v in ctx.example().values())
        shapes = dynamic_shapes(ctx.config.inputs, False)
        if takes_varargs(module):  # forward(*inputs) (a Hugging Face folder): one parameter holds every input
            shapes = (shapes,)
        with torch.no_grad():
            program = torch.export.export(module, example, dynamic_shapes=shapes)
            torch._inductor.aoti_compile_and_package(program, package_path=str(ctx.out_dir / PACKAGE))
        _write(ctx, package=PACKAGE)
        ranges = {str(s): str(r) for s, r in program.range_constraints.items()}
        compiler = f"AOTInductor (torch {torch.__version__}) for {ctx.target}"
        return BuildResult(ENTRY, {"compiler": compiler, "dynamic_ranges": ranges})


class LmTorch(Pass):
    """The text-generation baseline: the Hugging Face folder as exported, decoding with its KV cache."""

    def run(self, ctx: BuildContext, config: NoConfig) -> BuildResult:
        shutil.copytree(ctx.hf_folder, ctx.out_dir / HF_DIR)
        return BuildResult(HF_DIR, {"source": "the Hugging Face folder as exported"})
