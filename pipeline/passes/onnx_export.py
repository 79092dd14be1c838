"""onnx_fp32: the checked export itself, so it is benchmarked exactly as converted."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path
from typing import Any

from pipeline.passes.base import BuildContext, BuildResult, NoConfig, Pass

MODEL_FILE = "model.onnx"


def graph_stats(path: Path) -> dict[str, Any]:
    """Node count and the three most common op types, for before/after comparisons."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    ops = Counter(node.op_type for node in model.graph.node)
    return {"nodes": len(model.graph.node), "top_ops": ", ".join(f"{op}:{n}" for op, n in ops.most_common(3))}


class AsExported(Pass):
    def run(self, ctx: BuildContext, config: NoConfig) -> BuildResult:
        shutil.copy2(ctx.exported_onnx, ctx.out_dir / MODEL_FILE)
        return BuildResult(MODEL_FILE, {"nodes": graph_stats(ctx.out_dir / MODEL_FILE)["nodes"]})
