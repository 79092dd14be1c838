"""A tree ensemble compiled to native code: treelite read the library's file, tl2cgen generated C for its
trees and gcc built a shared library (pipeline.optimize.passes.trees:Treelite); tl2cgen's Predictor runs it
with `threads` worker threads. The predictions are shaped as the library's (pipeline.runtimes.boosters)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.core.data import Arrays
from pipeline.runtimes import boosters
from pipeline.runtimes.base import Session
from pipeline.runtimes.boosters import CompiledConfig, output_name, shaped

Config, Details = CompiledConfig, boosters.Details  # the tree runtimes' own (pipeline.runtimes.boosters)


class CompiledTreesSession(Session):
    def __init__(self, path: Path, threads: int, config: Config) -> None:
        import tl2cgen

        self._predictor = tl2cgen.Predictor(str(path), nthread=threads)
        self._threads, self._answer = threads, config.answer or "values"
        self.input_names = config.input_names or ["X"]
        self.output_names = config.output_names or [output_name(self._answer)]

    def prepare(self, inputs: Arrays) -> Callable[[], Any]:
        import tl2cgen

        rows = tl2cgen.DMatrix(np.ascontiguousarray(inputs[self.input_names[0]]))
        predictor, answer = self._predictor, self._answer
        return lambda: shaped(predictor.predict(rows), answer)

    def run(self, inputs: Arrays) -> Arrays:
        return {self.output_names[0]: self.prepare(inputs)()}

    def details(self) -> dict[str, Any]:
        import tl2cgen

        return Details.model_validate(
            {"threads": self._threads, "library": f"tl2cgen {tl2cgen.__version__}", "mode": "compiled C"}
        ).as_dict()


def load(artifact: Path, threads: int, config: Config, target: str = "cpu") -> CompiledTreesSession:
    return CompiledTreesSession(artifact, threads, config)
