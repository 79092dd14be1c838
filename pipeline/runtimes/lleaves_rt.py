"""A LightGBM model compiled to native code by lleaves (LLVM through llvmlite): its trees become one function
with LightGBM's own float64 thresholds, so every row takes LightGBM's branches (pipeline.optimize.passes.trees:
Lleaves). The model text file is read for its shape and the compiled library loaded from beside it; `predict`
runs on up to `threads` threads, one per ROWS_PER_JOB rows. The predictions are shaped as the library's
(pipeline.runtimes.boosters)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.core.data import Arrays
from pipeline.runtimes import boosters
from pipeline.runtimes.base import Session
from pipeline.runtimes.boosters import CompiledConfig, output_name, shaped

COMPILED_SUFFIX = ".so"  # the compiled library lies beside the model file: model.txt -> model.so
# lleaves' predict starts a thread pool per call when n_jobs > 1: on s2cloudless (170 trees, Intel Xeon, 2 cores)
# batch 1 took 131 us on 2 jobs against 10.5 us on one, and one job stayed faster up to 1024 rows (2.5 against
# 2.8 ms); a job per this many rows, up to `threads`
ROWS_PER_JOB = 4096


Config, Details = CompiledConfig, boosters.Details  # the tree runtimes' own (pipeline.runtimes.boosters)


def compiled_library(model_file: Path) -> Path:
    return model_file.with_suffix(COMPILED_SUFFIX)


class LleavesSession(Session):
    def __init__(self, path: Path, threads: int, config: Config) -> None:
        import lleaves

        library = compiled_library(path)
        if not library.is_file():
            raise FileNotFoundError(f"{library}: the compiled model is missing (lleaves compiles at build)")
        self._model = lleaves.Model(model_file=str(path))
        self._model.compile(cache=str(library))  # a cache that exists is loaded, not compiled again
        self._threads, self._answer = threads, config.answer or "values"
        self.input_names = config.input_names or ["X"]
        self.output_names = config.output_names or [output_name(self._answer)]

    def prepare(self, inputs: Arrays) -> Callable[[], Any]:
        rows = np.ascontiguousarray(inputs[self.input_names[0]], dtype=np.float64)  # lleaves reads float64
        model, answer = self._model, self._answer
        jobs = max(1, min(self._threads, len(rows) // ROWS_PER_JOB))
        return lambda: shaped(model.predict(rows, n_jobs=jobs), answer)

    def run(self, inputs: Arrays) -> Arrays:
        return {self.output_names[0]: self.prepare(inputs)()}

    def details(self) -> dict[str, Any]:
        from importlib.metadata import version

        library = f"lleaves {version('lleaves')} (llvmlite {version('llvmlite')})"
        return Details(threads=self._threads, library=library, mode="compiled by LLVM").as_dict()


def load(artifact: Path, threads: int, config: Config, target: str = "cpu") -> LleavesSession:
    return LleavesSession(artifact, threads, config)
