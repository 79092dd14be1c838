"""tf_graph and tf_xla: the TensorFlow/Keras source as a SavedModel serving a tf.function.

tf_xla sets jit_compile=True, so XLA compiles the function on its first call for each input
shape (the runtime does that call at load, so load_ms includes compilation). The pass checks the
saved graph really carries XLA's _XlaMustCompile mark, because Keras' own exporter silently drops it.
"""

from __future__ import annotations

from pathlib import Path

from pipeline.core.errors import NotApplicable
from pipeline.optimize.passes.base import BuildContext, BuildResult, NoConfig, Pass

SAVED_MODEL = "saved_model"


def xla_marked(saved_model: Path) -> bool:
    """True when a function in the saved graph must be compiled by XLA."""
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString((saved_model / "saved_model.pb").read_bytes())
    return any(
        f.attr["_XlaMustCompile"].b
        for graph in proto.meta_graphs
        for f in graph.graph_def.library.function
        if "_XlaMustCompile" in f.attr
    )


class _TfSaved(Pass):
    jit: bool

    def run(self, ctx: BuildContext, config: NoConfig) -> BuildResult:
        from pipeline.prepare.sources import load_source

        source = load_source(ctx.model, ctx.config, ctx.root)
        source.serving_module(jit=self.jit).save(ctx.out_dir / SAVED_MODEL)
        marked = xla_marked(ctx.out_dir / SAVED_MODEL)
        if marked != self.jit:
            raise RuntimeError(f"saved graph {'lacks' if self.jit else 'has'} the XLA compile mark")
        return BuildResult(SAVED_MODEL, {"jit_compile": self.jit, "xla_marked": marked},
                           runtime_config={"compile_at_load": self.jit})  # fmt: skip


class TfGraph(_TfSaved):
    jit = False


class TfXla(_TfSaved):
    jit = True

    def run(self, ctx: BuildContext, config: NoConfig) -> BuildResult:
        if texts := [name for name, spec in ctx.config.inputs.items() if spec.dtype == "str"]:
            raise NotApplicable(f"XLA compiles no string tensors, and {ctx.model} takes text ({', '.join(texts)})")
        return super().run(ctx, config)
