"""A tree ensemble's native variants: the library's own file as it ships (the baseline: what its users call
today, XGBoost's inplace_predict, LightGBM's Booster.predict or CatBoost's predict, so every speed-up is stated
against it), and the ensemble compiled to native code (treelite reads an XGBoost or LightGBM file, tl2cgen writes C
for its trees, gcc builds a shared library: the published 30x at batch 100 is treelite's own claim, measured here
like any other; lleaves compiles a LightGBM file through LLVM, keeping its float64 thresholds: its README's "about
10 us" at batch 1 against LightGBM's 52 us is measured here too)."""

from __future__ import annotations

import shutil
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from pipeline.core.layout import model_dir
from pipeline.optimize.passes.base import BuildContext, BuildResult, NoConfig, Pass
from pipeline.runtimes.boosters import open_ensemble

COMPILED = "trees.so"


def names(ctx: BuildContext) -> dict[str, list[str]]:
    """The runtime config naming the one input and the output as the source does."""
    return {"input_names": list(ctx.config.inputs), "output_names": ctx.source_info.output_names}


class AsSaved(Pass):
    def run(self, ctx: BuildContext, config: NoConfig) -> BuildResult:
        file = ctx.config.file or ""
        shutil.copy2(model_dir(ctx.model, ctx.root) / file, ctx.out_dir / file)
        ensemble = open_ensemble(ctx.out_dir / file)
        facts = {"source": f"copied from {file}", "library": f"{ensemble.name} {ensemble.version}",
                 "objective": ensemble.objective}  # fmt: skip
        return BuildResult(file, facts, runtime_config=names(ctx))


class TreeliteConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # how many C files the trees are split into, each compiled by gcc (two at a time on 2 cores; tl2cgen's
    # parallel_comp); 0: one file. gcc's time grows faster than a file's length: on a 2-core Xeon at -O3,
    # genomad's 405 XGBoost trees took 296 s in 2 files, 50 s in 64 and 38 s in 405 (one tree a file, but x1.25
    # slower calls, each tree a function); s2cloudless's 170 LightGBM trees 244 s in 2, 55 s in 64; a 100-tree
    # model 1.1 s in 2, 1.3 s in 64
    parallel_comp: int = Field(default=64, ge=0)
    # gcc's -O level for the generated C (tl2cgen passes -O3; a later -O wins). Trees are branches on constants,
    # which -O1 already compiles well and -O2/-O3 mostly make longer: on a 2-core Xeon (64 files, calls timed
    # interleaved in one process) -O1 against -O3 compiled genomad's 405 trees in 19.7 s, not 42.7, calls x0.85
    # at batch 1 and x0.65 at 256; s2cloudless's 170 in 22.7 s, not 45.5 (x1.02, x0.90); yasa's 2000 in 11.3,
    # not 17.4 (x0.97, x0.81); insurance's 100 in 0.9, not 1.1 (x1.01, x1.09). -O0: x1.4-2.1 slower calls. As
    # deployed, each in a contest worker of its own (six contests, both orders), genomad's -O3 calls at batch 1 read
    # x1.011-1.055 of -O1's: the one-process x0.85 above was partly the process's draw
    opt_level: Literal[0, 1, 2, 3] = 1
    # tl2cgen's `quantize`: compare integer indices of the thresholds instead of the floats (the same branches,
    # often faster for many trees)
    quantize: bool = False


class Treelite(Pass):
    Config = TreeliteConfig

    def run(self, ctx: BuildContext, config: TreeliteConfig) -> BuildResult:
        import tl2cgen
        import treelite

        path = model_dir(ctx.model, ctx.root) / (ctx.config.file or "")
        ensemble = open_ensemble(path)
        model = ensemble.library.treelite_model(ensemble.booster, path)
        params = {"parallel_comp": config.parallel_comp, "quantize": int(config.quantize)}
        optimize = f"-O{config.opt_level}"
        libpath = str(ctx.out_dir / COMPILED)
        tl2cgen.export_lib(model, toolchain="gcc", libpath=libpath, params=params, options=[optimize])
        facts = {"treelite": treelite.__version__, "tl2cgen": tl2cgen.__version__, "toolchain": f"gcc {optimize}",
                 "trees": model.num_tree, **params}  # fmt: skip
        return BuildResult(COMPILED, facts, runtime_config=names(ctx) | {"answer": ensemble.answer})


class LleavesConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # the CPU LLVM compiles for: x86-64, the baseline instruction set (the artifact runs on any x86-64 CPU, as a
    # `variants` artifact must); host, this CPU's name and features (may not run on another CPU)
    target_cpu: Literal["x86-64", "host"] = "x86-64"
    # lleaves' fblocksize: trees are cache-blocked into blocks of this many, fewer instruction-cache misses
    block_size: int = Field(default=34, ge=1)
    # lleaves' finline: inline every tree into the root function. Faster calls, but LLVM's compile time and memory
    # grow steeply with the leaves: s2cloudless's 170 trees of up to 770 leaves had not compiled after 14 minutes
    # and 11.6 GB inlined; 36 s not
    inline: bool = False


class Lleaves(Pass):
    Config = LleavesConfig

    def run(self, ctx: BuildContext, config: LleavesConfig) -> BuildResult:
        from importlib.metadata import version

        import lleaves

        from pipeline.runtimes.lleaves_rt import compiled_library

        file = ctx.config.file or ""
        shutil.copy2(model_dir(ctx.model, ctx.root) / file, ctx.out_dir / file)
        ensemble = open_ensemble(ctx.out_dir / file)
        model = lleaves.Model(model_file=str(ctx.out_dir / file))
        cpu = {"target_cpu": "x86-64", "target_cpu_features": ""} if config.target_cpu == "x86-64" else {}
        # float64 thresholds (use_fp64), as LightGBM compares; written once here, loaded by the runtime
        library = compiled_library(ctx.out_dir / file)
        model.compile(cache=str(library), fblocksize=config.block_size, finline=config.inline, use_fp64=True, **cpu)
        facts = {"lleaves": version("lleaves"), "llvmlite": version("llvmlite"), "trees": model.num_trees(),
                 "target_cpu": config.target_cpu, "block_size": config.block_size, "inline": config.inline}  # fmt: skip
        return BuildResult(file, facts, runtime_config=names(ctx) | {"answer": ensemble.answer})
