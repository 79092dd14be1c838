"""deploy/<model>/serving/: every engine's repository written at once (a temporary folder renamed into
place), checked before it replaces the last one, and a README saying how to start each engine or why
it cannot serve this artifact as it is."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel

from pipeline.core.errors import ModelFileError
from pipeline.core.files import atomic_dir, write_text
from pipeline.core.records import manifest as manifest_record
from pipeline.core.records.manifest import Manifest
from pipeline.serve.repositories.check import check_analyzer, check_kserve, check_ovms, check_triton
from pipeline.serve.repositories.kserve import write_kserve
from pipeline.serve.repositories.ovms import write_ovms
from pipeline.serve.repositories.scope import ENGINES, NotServable, why_not
from pipeline.serve.repositories.triton import write_triton
from pipeline.serve.signature import Signature, read_signature

SERVING = "serving"
README = "README.md"
START = {
    "triton": ("triton/", "a Triton model repository ({model}/config.pbtxt, {model}/1/); model_analyzer.yaml beside "
               "it searches around its settings on your Triton (`model-analyzer profile -f model_analyzer.yaml`)",
               "tritonserver --model-repository=$PWD/triton"),
    "ovms": ("ovms/", "an OpenVINO Model Server configuration (config.json, {model}/1/; provenance.json: sha256 and "
             "where each setting came from)", "ovms --config_path $PWD/ovms/config.json --port 9000 --rest_port 8000"),
    "kserve": ("kserve/", "KServe InferenceServices for the engines above (replace storageUri first)",
               "kubectl apply -f kserve/{engine}.yaml"),
}  # fmt: skip


class EngineResult(BaseModel):
    engine: str
    written: str = ""  # what was written, from the serving folder
    reason: str = ""  # why it cannot serve the artifact as it is

    @property
    def line(self) -> str:
        return (
            f"{self.engine}: {self.written}" if self.written else f"{self.engine}: cannot serve it as is: {self.reason}"
        )


class ServingReport(BaseModel):
    """Per engine: written, or not servable and why."""

    model: str
    folder: str
    engines: list[EngineResult]

    def lines(self) -> list[str]:
        return [result.line for result in self.engines]


def write_serving(folder: Path) -> ServingReport:
    """Write and check deploy folder `folder`'s serving/ (replacing the last one); a failed check keeps
    the last one and raises, naming the file and field."""
    manifest = manifest_record.load(folder)
    why, signature = why_not(manifest), None
    if why is None:
        try:
            signature = read_signature(folder, manifest)
        except ModelFileError as error:
            why = str(error)
    with atomic_dir(folder / SERVING) as serving:
        if signature is None:
            results = [EngineResult(engine=engine, reason=str(why)) for engine in ENGINES]
        else:
            results = _write_engines(folder, manifest, signature, serving)
        write_text(serving / README, readme(manifest, results))
        problems = check_serving(serving, manifest, signature, results)
        if problems:
            raise ModelFileError("; ".join(f"{folder / SERVING}/{problem}" for problem in problems))
    return ServingReport(model=manifest.model, folder=str(folder / SERVING), engines=results)


def _write_engines(folder: Path, manifest: Manifest, signature: Signature, serving: Path) -> list[EngineResult]:
    writers: dict[str, Callable[[], str]] = {
        "triton": lambda: write_triton(folder, manifest, signature, serving),
        "ovms": lambda: write_ovms(folder, manifest, serving),
    }
    results = []
    for engine, write in writers.items():
        try:
            results.append(EngineResult(engine=engine, written=write()))
        except NotServable as error:
            results.append(EngineResult(engine=engine, reason=str(error)))
    servable = [result.engine for result in results if result.written]
    if servable:
        results.append(EngineResult(engine="kserve", written=write_kserve(manifest, serving, servable)))
    else:
        results.append(EngineResult(engine="kserve", reason="neither Triton nor OVMS serves it (above)"))
    return results


def check_serving(
    serving: Path, manifest: Manifest, signature: Signature | None, results: list[EngineResult]
) -> list[str]:
    """Every written engine's checks."""
    written = {result.engine for result in results if result.written}
    problems = []
    if "triton" in written and signature is not None:
        # the analyzer's file reads config.pbtxt: checked once that parses and holds
        problems += check_triton(serving / "triton", manifest, signature) or check_analyzer(serving, manifest)
    if "ovms" in written:
        problems += check_ovms(serving / "ovms", manifest)
    for engine in sorted(written & {"triton", "ovms"}):
        problems += check_kserve(serving / "kserve" / f"{engine}.yaml", manifest)
    return problems


def readme(manifest: Manifest, results: list[EngineResult]) -> str:
    """What each folder is and the one command that starts each engine; why not, for the others."""
    served = [r.engine for r in results if r.written and r.engine != "kserve"]
    lines = [f"# Serving {manifest.model}", ""]
    if served:
        lines += [
            f"Written by `python -m pipeline serving deploy/{manifest.model}` from manifest.json (variant "
            f"{manifest.variant}, measured on {manifest.machine}) and checked against the artifact. Each setting "
            "names its measurement in a comment (ovms: provenance.json). Commands run from this folder.",
            "",
        ]
    for result in results:
        folder, what, command = START[result.engine]
        if result.written:
            engines = served if result.engine == "kserve" else [result.engine]
            start = " or ".join(f"`{command.format(engine=engine)}`" for engine in engines)
            lines.append(f"- `{folder}`: {what.format(model=manifest.model)}. Start: {start}")
        else:
            lines.append(f"- {result.engine}: cannot serve {manifest.model} as is: {result.reason}")
    if manifest.text and served:
        lines += ["", f"Clients tokenize text with ../{manifest.text.tokenizer}/ (not served): the engines take ids."]
    return "\n".join(lines) + "\n"
