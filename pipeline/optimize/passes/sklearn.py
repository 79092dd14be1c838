"""sklearn: the estimator as it was saved, the baseline of a scikit-learn source: what its users call today
(`predict_proba` / `predict`), so the report answers their first question (is ONNX Runtime faster than
scikit-learn here?), and where it stays the fastest faithful variant the deployment is the file itself."""

from __future__ import annotations

import shutil

from pipeline.core.layout import model_dir
from pipeline.optimize.passes.base import BuildContext, BuildResult, NoConfig, Pass


class AsSaved(Pass):
    def run(self, ctx: BuildContext, config: NoConfig) -> BuildResult:
        import sklearn

        file = ctx.config.file or ""
        shutil.copy2(model_dir(ctx.model, ctx.root) / file, ctx.out_dir / file)
        return BuildResult(
            file,
            {"source": f"copied from {file}", "sklearn": sklearn.__version__},
            runtime_config={"input_names": list(ctx.config.inputs), "output_names": ctx.source_info.output_names},
        )
