"""torch_eager: the PyTorch source as it is, the baseline every ratio is taken against.

The artifact is the state_dict plus torch_model.json naming the factory that builds the module;
the factory's code stays in models/<name>/ (a PyTorch eager model cannot be run without it).
A model without a weights file is rebuilt from the factory with its recorded init seed.
"""

from __future__ import annotations

import shutil

from pipeline.config import model_dir
from pipeline.files import write_json
from pipeline.passes.base import BuildContext, BuildResult, NoConfig, Pass

ENTRY = "torch_model.json"
WEIGHTS = "weights.pt"


class TorchEager(Pass):
    def run(self, ctx: BuildContext, config: NoConfig) -> BuildResult:
        if ctx.config.file:
            shutil.copy2(model_dir(ctx.model, ctx.root) / ctx.config.file, ctx.out_dir / WEIGHTS)
        write_json(
            ctx.out_dir / ENTRY,
            {
                "factory": ctx.config.factory,
                "factory_args": ctx.config.factory_args,
                "weights": WEIGHTS if ctx.config.file else None,
                "init_seed": ctx.config.init_seed,
                "inputs": list(ctx.config.inputs),
                "outputs": ctx.source_info["output_names"],
            },
        )
        return BuildResult(ENTRY, {"factory": ctx.config.factory})
