"""Load the artifact with the runtime version inside the engine release a repository is written for
(pipeline/core/engine_versions.yaml), in that version's own environment (pipeline.serve.runtime_env),
and compare its outputs with `predict`'s on the same rows: an opset or IR the release cannot read is
found here, not when the engine starts, and a release that computes differently says by how much."""

from __future__ import annotations

import json
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline.core.data import Arrays, generate_inputs
from pipeline.core.engines import Release
from pipeline.core.errors import Unavailable
from pipeline.core.inputs import to_model_layout
from pipeline.core.records.manifest import Manifest
from pipeline.serve import in_runtime
from pipeline.serve.predict import Predictor
from pipeline.serve.repositories import measured
from pipeline.serve.runtime_env import runtime_python
from pipeline.serve.side_by_side import SideBySide, side_by_side

ROWS = 64
MATCH = 1e-2  # outputs match when every value is within 1% of the output's largest magnitude
TIMEOUT_S = 300


@dataclass(frozen=True)
class ReleaseCheck:
    """What one engine release's runtime made of the artifact."""

    release: Release
    runtime: str
    version: str
    status: str  # matches | differs | unreadable | not checked
    detail: str

    @property
    def line(self) -> str:
        """One line for the written files: the release, the runtime version, what it did."""
        return f"{self.release.title} runs {self.runtime} {self.version}: {self.detail}"


def engine_runtime(engine: str, manifest: Manifest) -> str:
    """The runtime an engine loads the artifact with: Triton picks the backend by file, OVMS is OpenVINO."""
    return manifest.runtime if engine == "triton" else "openvino"


@dataclass(frozen=True)
class Reference:
    """The rows every release is run on, rows first and checked, and what `predict` answers to them
    (the pipeline's runtime, as measured): computed once per serving folder."""

    inputs: Arrays
    outputs: Arrays
    which: str  # "64 reference rows"


def reference(predictor: Predictor, rows: Arrays | None = None) -> Reference:
    """The rows given (the model's reference rows), else generated from the manifest's input specs; one
    fixed batch where the file fixes it (the release's run feeds it whole)."""
    manifest = predictor.manifest
    count = manifest.fixed_batch or ROWS
    if rows is not None:
        taken = {name: array[:count] for name, array in rows.items()}
        which = f"{len(next(iter(taken.values())))} reference rows"
    else:
        vocab = min(manifest.token_bounds.values()) if manifest.token_bounds else None
        taken = generate_inputs(manifest.inputs, count, seed=0, dims=manifest.dims, vocab_size=vocab)
        which = f"{count} generated rows"
    # the pipeline's rows hold every input rows first; check takes them as a user writes them (the model's layout)
    checked = predictor.check(to_model_layout(taken, manifest.inputs), source=which)
    return Reference(checked, predictor.run(checked), which)


def unchecked(release: Release, manifest: Manifest, engine: str, why: str) -> ReleaseCheck:
    runtime = engine_runtime(engine, manifest)
    version = getattr(release, runtime)
    return ReleaseCheck(release, runtime, version, "not checked", f"not checked ({why})")


def check_release(
    folder: Path,
    manifest: Manifest,
    engine: str,
    release: Release,
    expected: Reference,
    properties: dict[str, str] | None = None,
) -> ReleaseCheck:
    """Run the artifact in `release`'s runtime version on the reference rows and compare with what
    `predict` answered. `properties`: the OpenVINO plugin settings the engine's files pin (OVMS's
    plugin_config); none: the plugin's defaults, as Triton's backend runs."""
    runtime = engine_runtime(engine, manifest)
    version = getattr(release, runtime)
    try:
        python = runtime_python(runtime, version)
    except Unavailable as error:
        return unchecked(release, manifest, engine, str(error))
    with tempfile.TemporaryDirectory(prefix="release-check-") as tmp:
        feeds = to_model_layout(expected.inputs, manifest.inputs)  # as the file takes them
        np.savez(Path(tmp) / "in.npz", **feeds)
        command = [str(python), in_runtime.__file__, "run", runtime, str(folder / manifest.entry), f"{tmp}/in.npz",
                   f"{tmp}/out.npz", json.dumps(properties or {})]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            return ReleaseCheck(release, runtime, version, "unreadable", f"crashed running {manifest.entry}: {last}")
        answer = json.loads(done.stdout.strip().splitlines()[-1])
        if "error" in answer:
            return ReleaseCheck(
                release, runtime, version, "unreadable", f"cannot load {manifest.entry}: {answer['error']}"
            )
        with np.load(Path(tmp) / "out.npz") as got:
            theirs = {name: got[name] for name in got.files}
    return _compare(release, runtime, version, expected.outputs, theirs, expected.which)


def time_release(
    folder: Path,
    manifest: Manifest,
    engine: str,
    release: Release,
    expected: Reference,
    properties: dict[str, str] | None,
    seconds: float,
) -> SideBySide | str:
    """The artifact's batch-1 latency in `release`'s runtime version beside this pipeline's, on the first
    reference row (the whole batch where the file fixes it), with the thread budget the engine's files
    give it; a line saying why not where the release runs this pipeline's own version or it cannot be
    timed here."""
    runtime = engine_runtime(engine, manifest)
    version = getattr(release, runtime)
    ours = in_runtime.version_of(runtime)
    if version == ours:
        return f"not timed beside ours: it runs this pipeline's {runtime} {ours}, as measured"
    rows = manifest.fixed_batch or 1
    feeds = to_model_layout({name: array[:rows] for name, array in expected.inputs.items()}, manifest.inputs)
    threads = measured.concurrency(manifest).total_threads
    try:
        python = runtime_python(runtime, version)
        return side_by_side(python, runtime, folder / manifest.entry, feeds, properties or {}, threads, seconds)
    except Unavailable as error:
        return f"not timed beside ours: {error}"


def _compare(release: Release, runtime: str, version: str, ours: Arrays, theirs: Arrays, which: str) -> ReleaseCheck:
    worst, missing = 0.0, sorted(set(ours) - set(theirs))
    if missing:
        return ReleaseCheck(release, runtime, version, "differs", f"loads, but has no output {', '.join(missing)}")
    for name, expected in ours.items():
        got = np.asarray(theirs[name], np.float64).reshape(np.shape(expected))
        expected = np.asarray(expected, np.float64)
        scale = float(np.max(np.abs(expected))) or 1.0
        worst = max(worst, float(np.max(np.abs(got - expected))) / scale if expected.size else 0.0)
    relative = f"largest difference {worst:.2g} of each output's largest magnitude"
    if worst <= MATCH:
        return ReleaseCheck(
            release, runtime, version, "matches", f"loads; outputs match predict's on {which} ({relative})"
        )
    return ReleaseCheck(
        release, runtime, version, "differs", f"loads, but outputs differ from predict's on {which} ({relative})"
    )
