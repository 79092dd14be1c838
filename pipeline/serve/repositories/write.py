"""deploy/<model>/serving/: every engine's repository written at once (a temporary folder renamed into
place), checked before it replaces the last one, and a README saying how to start each engine or why
it cannot serve this artifact as it is."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path

from pydantic import BaseModel

from pipeline.core import engines, onnx_files
from pipeline.core.config import ServingConfig
from pipeline.core.data import Arrays
from pipeline.core.engines import Release
from pipeline.core.errors import ModelFileError
from pipeline.core.files import atomic_dir, write_text
from pipeline.core.records import manifest as manifest_record
from pipeline.core.records.manifest import Manifest
from pipeline.serve.predict import load
from pipeline.serve.repositories import ovms, triton
from pipeline.serve.repositories.check import check_analyzer, check_kserve, check_ovms, check_triton
from pipeline.serve.repositories.convert import convertible, downgraded
from pipeline.serve.repositories.kserve import write_kserve
from pipeline.serve.repositories.ovms import write_ovms
from pipeline.serve.repositories.scope import ENGINES, NotServable, needs_extensions, why_not
from pipeline.serve.repositories.triton import write_triton
from pipeline.serve.repositories.versions import (
    Reference,
    ReleaseCheck,
    check_release,
    reference,
    time_release,
    unchecked,
)
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
    checked: str = ""  # what the engine release's runtime version made of the artifact
    latency: dict | None = None  # its batch-1 latency there beside this pipeline's (SideBySide.to_dict)
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


def write_serving(folder: Path, config: ServingConfig | None = None, rows: Arrays | None = None) -> ServingReport:
    """Write and check deploy folder `folder`'s serving/ (replacing the last one) for the engine releases
    `config` names, each loading the artifact with its own runtime version first (on `rows`, the model's
    reference rows, else generated ones); a failed check keeps the last one and raises, naming the file
    and field."""
    manifest = manifest_record.load(folder)
    why, signature = why_not(manifest), None
    why = why or needs_extensions(folder, manifest)
    if why is None:
        try:
            signature = read_signature(folder, manifest)
        except ModelFileError as error:
            why = str(error)
    with atomic_dir(folder / SERVING) as serving:
        served: dict[str, Manifest] = {}
        if signature is None:
            results = [EngineResult(engine=engine, reason=str(why)) for engine in ENGINES]
        else:
            results, served = _write_engines(folder, manifest, signature, serving, config or ServingConfig(), rows)
        write_text(serving / README, readme(manifest, results, locales_asked(folder, manifest)))
        problems = check_serving(serving, manifest, signature, results, served)
        if problems:
            raise ModelFileError("; ".join(f"{folder / SERVING}/{problem}" for problem in problems))
    return ServingReport(model=manifest.model, folder=str(folder / SERVING), engines=results)


def _write_engines(
    folder: Path, manifest: Manifest, signature: Signature, serving: Path, config: ServingConfig, rows: Arrays | None
) -> tuple[list[EngineResult], dict[str, Manifest]]:
    """Each engine's repository for the artifact as its release runs it, and that artifact's manifest
    (the deploy folder's, or the converted file's) by engine."""
    expected = reference(load(folder, verify=False, check_values=False), rows) if config.check_versions else None
    writers: dict[str, Callable[[Path, Manifest, str], str]] = {
        "triton": lambda source, served, checked: write_triton(source, served, signature, serving, checked),
        "ovms": lambda source, served, checked: write_ovms(source, served, serving, checked),
    }
    results, manifests = [], {}
    with tempfile.TemporaryDirectory(prefix="converted-") as converted:
        for engine, write in writers.items():
            release = engines.release(engine, getattr(config, engine))
            source, served, latency = folder, manifest, None
            try:
                if expected is None:
                    checked = unchecked(release, manifest, engine, "serving.check_versions is false").line
                    if engine == "ovms":  # the release check would have loaded it: this machine's OpenVINO does
                        ovms.refuse_unreadable(folder, manifest)
                else:
                    check = partial(_check_in, engine=engine, release=release, expected=expected)
                    source, served, checked = _readable(folder, manifest, check, Path(converted) / engine)
                    if config.compare_seconds:
                        pinned, seconds = _pinned(engine, served), config.compare_seconds
                        timed = time_release(source, served, engine, release, expected, pinned, seconds)
                        if isinstance(timed, str):  # why it was not timed
                            checked += f"; {timed}"
                        else:
                            checked, latency = f"{checked}; {timed.text}", timed.to_dict()
                written = write(source, served, checked)
                results.append(EngineResult(engine=engine, written=written, checked=checked, latency=latency))
                manifests[engine] = served
            except NotServable as error:
                results.append(EngineResult(engine=engine, reason=str(error)))
    servable = [result.engine for result in results if result.written]
    if servable:
        results.append(EngineResult(engine="kserve", written=write_kserve(manifest, serving, servable)))
    else:
        results.append(EngineResult(engine="kserve", reason="neither Triton nor OVMS serves it (above)"))
    return results, manifests


def _check_in(at: Path, described: Manifest, *, engine: str, release: Release, expected: Reference) -> ReleaseCheck:
    """The release check, run as the engine's files set it."""
    return check_release(at, described, engine, release, expected, _pinned(engine, described))


def _pinned(engine: str, manifest: Manifest) -> dict[str, str]:
    """The OpenVINO settings the engine's own files pin (what its release's runtime is run with)."""
    return (triton.pinned_properties if engine == "triton" else ovms.pinned_properties)(manifest)


def _readable(
    folder: Path, manifest: Manifest, check: Callable[[Path, Manifest], ReleaseCheck], out: Path
) -> tuple[Path, Manifest, str]:
    """The artifact as the release runs it (converted to an older opset where it cannot read the file
    as it is) and the line saying what the release made of it; NotServable when it cannot run it as validated."""
    checked = check(folder, manifest)
    if checked.status == "unreadable" and convertible(manifest):
        found = downgraded(folder, manifest, out, check)
        if found is not None:
            source, served, again, how = found
            if again.status == "matches":
                return source, served, f"{again.line}; {how}"
            checked = again
    if checked.status != "matches":  # an engine that cannot run it as validated
        raise NotServable(checked.line)
    return folder, manifest, checked.line


def check_serving(
    serving: Path,
    manifest: Manifest,
    signature: Signature | None,
    results: list[EngineResult],
    served: dict[str, Manifest] | None = None,
) -> list[str]:
    """Every written engine's checks, each against the artifact it serves (`served`: a converted file's
    manifest by engine; the deploy folder's otherwise)."""
    written = {result.engine for result in results if result.written}
    served = {engine: (served or {}).get(engine, manifest) for engine in ("triton", "ovms")}
    problems = []
    if "triton" in written and signature is not None:
        # the analyzer's file reads config.pbtxt: checked once that parses and holds
        problems += check_triton(serving / "triton", served["triton"], signature) or check_analyzer(serving, manifest)
    if "ovms" in written:
        problems += check_ovms(serving / "ovms", served["ovms"])
    for engine in sorted(written & {"triton", "ovms"}):
        problems += check_kserve(serving / "kserve" / f"{engine}.yaml", manifest)
    return problems


def locales_asked(folder: Path, manifest: Manifest) -> list[str]:
    """The locales an ONNX artifact's StringNormalizers ask ONNX Runtime for: it opens the model only in an
    image that has them."""
    if not manifest.entry.endswith(".onnx") or not (folder / manifest.entry).is_file():
        return []
    import onnx

    return onnx_files.string_locales(onnx.load(str(folder / manifest.entry), load_external_data=False))


def readme(manifest: Manifest, results: list[EngineResult], locales: list[str] = ()) -> str:
    """What each folder is and the one command that starts each engine; why not, for the others; the locales
    the image must have."""
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
            if result.checked:
                lines.append(f"  {result.checked}")
        else:
            lines.append(f"- {result.engine}: cannot serve {manifest.model} as is: {result.reason}")
    if manifest.text and served:
        lines += ["", f"Clients tokenize text with ../{manifest.text.tokenizer}/ (not served): the engines take ids."]
    if locales and served:
        lines += ["", f"The graph's StringNormalizer asks ONNX Runtime for locale {' and '.join(locales)}: the image "
                  "an engine runs in must have it (`locale -a` lists it there), or ONNX Runtime will not open the "
                  "model (\"Failed to construct locale\")."]  # fmt: skip
    return "\n".join(lines) + "\n"
