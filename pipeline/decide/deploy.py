"""The select stage: choose a model's deployment artifact from the figures measured on this machine,
and write deploy/<model>/.

deploy/<model>/ holds the chosen variant's files, the model's code when its runtime needs it
(torch_eager and jax_jit name a factory), and manifest.json: what it is, how to run it, the numbers
it was chosen on, sha256 of every file, the constraints, why it won and why every other variant
did not; serving/ the Triton, OpenVINO Model Server and KServe repositories written from those
numbers (pipeline.serve.repositories), or why no engine serves the artifact as it is.
reports/selection/<model>.json records the choice (committed), which the CI gate compares between
revisions.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from pipeline import __version__
from pipeline.core import layout, records
from pipeline.core.config import Params
from pipeline.core.data import Arrays, DataSet
from pipeline.core.files import atomic_dir, iter_files, read_json, sha256
from pipeline.core.records import VariantRecord, code_entry
from pipeline.core.records import build as build_record
from pipeline.core.records import env as records_env
from pipeline.core.records import manifest as manifest_record
from pipeline.core.records import source as source_record
from pipeline.core.records.manifest import Manifest, SourceFacts, TextFacts
from pipeline.core.records.source import SourceRecord
from pipeline.core.registry import RUNTIMES
from pipeline.decide.choice import choice_record
from pipeline.decide.contest import Decision, decide
from pipeline.decide.roofline import write_roofline
from pipeline.decide.selection import decided_by
from pipeline.serve.repositories.write import write_serving
from pipeline.serve.text import HF_FOLDER_FACTORY, TOKENIZER

CODE = "code"


def select_artifact(model: str, params: Params, root: Path = Path(".")) -> dict[str, Any]:
    """Run the select stage for one model on this machine's figures; returns its status and one
    line saying what it chose and why."""
    results = root
    machine = records.machine_name(root) or "?"
    found = records.load(model, results)
    decision = decide(model, found, params, root)
    record = choice_record(model, decision, found, params)
    chosen = found[decision.chosen] if decision.chosen else None
    distances = write_roofline(model, found, root)
    with atomic_dir(layout.deploy_dir(model, results)) as tmp:
        package = {}
        if decision.chosen and chosen:
            artifact = layout.variant_dir(model, decision.chosen, root)
            package = _package(model, artifact, chosen, params, root, tmp)
        manifest_record.write(
            Manifest(
                model=model,
                variant=decision.chosen,
                machine=machine,
                **package,
                selection=_explanation(decision, params, model, record.not_applicable),
                roofline=distances.get(decision.chosen or ""),
                environment=records_env.load(results),
                pipeline_version=__version__,
            ),
            tmp,
        )
        serving = write_serving(tmp, params.serving, _reference_rows(model, root)) if chosen else None
    records.write_choice(model, record, results)
    served = [r.engine for r in serving.engines if r.written] if serving else []
    return {
        "status": record.status,
        "reason": (f"chose {decision.chosen}: {decision.why}" if chosen else decision.why)
        + (f"; serving/: {', '.join(served) or 'no engine serves it as is'}" if serving else ""),
    }


def _reference_rows(model: str, root: Path) -> Arrays | None:
    """The model's reference inputs (the rows its source's outputs were recorded on), for the serving
    releases' check; None when the export wrote none."""
    path = layout.source_dir(model, root) / layout.REFERENCE
    return DataSet.load(path).inputs if path.is_file() else None


def _package(model: str, artifact: Path, record: VariantRecord, params: Params, root: Path, out: Path) -> dict:
    """Copy the chosen artifact (and the code it imports) into `out`; describe it for the manifest."""
    build = build_record.load(artifact)
    for path in artifact.iterdir():
        if path.name != layout.BUILD_INFO:
            (shutil.copytree if path.is_dir() else shutil.copy2)(path, out / path.name)
    entry = out / build.entry
    factory = code_entry.load(entry).factory if entry.suffix == ".json" else None  # a code artifact's entry
    if factory:
        copy_module_code(factory.partition(":")[0], root, out / CODE)
    config = params.model(model)
    source = source_record.load(model, root)
    return {
        "runtime": build.runtime,
        "runtime_version": _version(RUNTIMES[build.runtime].distribution),
        "precision": record.precision,  # as executed (bench stage)
        "precision_declared": build.precision,
        "device": build.target,
        "entry": build.entry,
        "runtime_config": build.runtime_config,
        "code": CODE if factory else None,
        "inputs": source.inputs,
        "token_bounds": source.token_bounds,
        "fixed_batch": source.fixed_batch,
        "dims": source.dims,
        "outputs": source.output_names,
        "source": SourceFacts(kind=config.source, metric=config.metric, task=config.task),
        **(generation_facts(source, root) if config.generates else {}),
        **text_facts(config.factory, config.factory_args, root, out),
        "metrics": record,
        "build": build.build,
        "files": {str(p.relative_to(out)): sha256(p) for p in iter_files(out)},
    }


def generation_facts(source: SourceRecord, root: Path) -> dict[str, Any]:
    """What predict needs to generate text: the context length and the end-of-text token."""
    hf = read_json(layout.source_dir(source.model, root) / layout.HF_DIR / "config.json")  # Hugging Face's
    eos = hf.get("eos_token_id")
    return {"context": source.family.context, "eos_token_id": eos[0] if isinstance(eos, list) else eos}


NOT_TOKENIZER = (".safetensors", ".bin", ".h5", ".msgpack", ".pt", ".onnx", ".dvc")  # weights, DVC's pointers


def text_facts(factory: str | None, args: dict[str, Any], root: Path, out: Path) -> dict[str, Any]:
    """A Hugging Face text model (`add` of a folder): its tokenizer and config copied beside the
    artifact (not its weights), and its label names, so `predict --text` tokenizes as the eval rows
    were. Other models: nothing."""
    if factory != HF_FOLDER_FACTORY or args["task"] == "image-classification":  # `add` writes the task
        return {}
    folder = root / args["folder"]
    (out / TOKENIZER).mkdir()
    for path in folder.iterdir():
        if path.is_file() and path.suffix not in NOT_TOKENIZER and not path.name.startswith("."):
            shutil.copy2(path, out / TOKENIZER / path.name)
    labels = read_json(folder / "config.json").get("id2label") if args["task"] != "feature-extraction" else None
    return {"text": TextFacts(task=args["task"], tokenizer=TOKENIZER, labels=labels)}


def copy_module_code(module: str, root: Path, dest: Path) -> None:
    """Copy a factory's module, its package __init__ files and its sibling .py files under `dest`.

    Enough for a model folder's net.py (models/<name>/*.py); a factory that imports code from
    elsewhere needs that code installed where the artifact is deployed.
    """
    if str(root.resolve()) not in sys.path:
        sys.path.insert(0, str(root.resolve()))
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return
    origin = Path(spec.origin).resolve()
    base = origin.parents[module.count(".")]  # the directory holding the top-level package
    files = set(origin.parent.glob("*.py"))
    parts = module.split(".")
    for depth in range(1, len(parts)):
        init = base.joinpath(*parts[:depth], "__init__.py")
        if init.exists():
            files.add(init)
    for path in sorted(files):
        target = dest / path.relative_to(base)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "unknown"


def _explanation(decision: Decision, params: Params, model: str, not_applicable: dict[str, str]) -> dict[str, Any]:
    """The manifest's `selection`: the choice's reasons; `not_applicable` as the choice record holds it."""
    config, selection = params.select, decision.selection
    front = {
        c.variant: {
            "latency_ms": decision.latency_ms.get(c.variant, c.latency_ms),
            "accuracy_drop": c.accuracy_drop,
            "fidelity": c.fidelity,
            "size_mb": c.size_mb,
        }
        for c in (decision.candidates[v] for v in decision.pareto)
    }
    constraints = config.constraints_for(model)
    winner = decision.candidates[decision.chosen] if decision.chosen else None
    return {
        "objective": config.objective,
        "percentile": config.percentile,
        "constraints": constraints.model_dump(),
        "quality_decided_by": decided_by(winner, constraints),
        "why": decision.why,
        "screen": selection.why,
        "contest": decision.contest,
        "tied": decision.tied,
        "identical": decision.identical,
        "feasible": selection.feasible,
        "pareto_front": front,
        "rejected": decision.rejected,
        "not_applicable": not_applicable,
        "closest": selection.closest,
    }
