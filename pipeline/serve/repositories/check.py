"""Check each written repository against the artifact it serves: what an engine would refuse at load
time (or, worse, load and run differently), found before anyone starts one. Each check returns the
problems, one line each naming the file (from the serving folder) and the field; empty: valid."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from pipeline.core.errors import first_line
from pipeline.core.records.manifest import Manifest
from pipeline.serve.repositories import analyzer, kserve, measured, ovms, triton
from pipeline.serve.repositories.artifact import VERSION, file_problems
from pipeline.serve.signature import Signature, TensorSpec, triton_type

GRAPH_LEVELS = (-1, 0, 1, 2)  # onnxruntime_backend: basic, all (its default), extended, disabled
QUANTITY = re.compile(r"^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)?$")
SCALE = {None: 1e-6, "k": 1e-3, "M": 1.0, "G": 1e3, "T": 1e6, "Ki": 1.024e-3, "Mi": 1.048576, "Gi": 1073.741824}
SCALE["Ti"] = SCALE["Gi"] * 1024


def check_triton(repo_dir: Path, manifest: Manifest, signature: Signature) -> list[str]:
    """serving/triton/<model>/config.pbtxt against the model file and the manifest."""
    model_dir = repo_dir / manifest.model
    shown = f"{repo_dir.name}/{manifest.model}/{triton.CONFIG}"
    try:
        config = text_format.Parse((model_dir / triton.CONFIG).read_text(), mc.ModelConfig())
    except FileNotFoundError:
        return [f"{shown}: missing"]
    except text_format.ParseError as error:
        return [f"{shown}: not a Triton model config: {error}"]
    problems = []
    if config.name != model_dir.name:
        problems.append(f"{shown}: name {config.name!r} is not its folder's name {model_dir.name!r}")
    backend = triton.BACKEND[manifest.runtime]
    if config.backend != backend:
        problems.append(f"{shown}: backend {config.backend!r}: {manifest.entry} runs on the {backend!r} backend")
    if config.platform:
        problems.append(f"{shown}: platform {config.platform!r}: leave it empty, backend {backend!r} names the engine")
    loads = config.default_model_filename or triton.DEFAULT_MODEL_FILE[backend]
    if not (model_dir / VERSION / loads).is_file():
        problems.append(f"{shown}: default_model_filename: {VERSION}/{loads} is not in the version folder")
    problems += _batching(shown, config, manifest, signature, backend)
    batched = config.max_batch_size > 0
    problems += _tensors(shown, "input", config.input, signature.inputs, batched, manifest.entry)
    problems += _tensors(shown, "output", config.output, signature.outputs, batched, manifest.entry)
    for i, group in enumerate(config.instance_group):
        if group.count < 1:
            problems.append(f"{shown}: instance_group[{i}].count {group.count}: at least 1 instance")
        if group.kind not in (mc.ModelInstanceGroup.KIND_CPU, mc.ModelInstanceGroup.KIND_AUTO):
            kind = mc.ModelInstanceGroup.Kind.Name(group.kind)
            problems.append(f"{shown}: instance_group[{i}].kind {kind}: the artifact was measured on the CPU")
    problems += _parameters(shown, config, backend)
    if config.optimization.graph.level not in GRAPH_LEVELS:
        problems.append(f"{shown}: optimization.graph.level {config.optimization.graph.level}: one of {GRAPH_LEVELS}")
    return problems + file_problems(model_dir / VERSION, manifest, f"{repo_dir.name}/{manifest.model}/{VERSION}")


def check_analyzer(serving: Path, manifest: Manifest) -> list[str]:
    """model_analyzer.yaml searches around what triton/'s config.pbtxt holds, on the CPU, in that repository."""
    config = text_format.Parse((serving / "triton" / manifest.model / triton.CONFIG).read_text(), mc.ModelConfig())
    shown = analyzer.FILE
    try:
        search = yaml.safe_load((serving / shown).read_text())
    except (FileNotFoundError, yaml.YAMLError) as error:
        return [f"{shown}: {first_line(error)}"]
    model = (search.get("profile_models") or {}).get(manifest.model) if isinstance(search, dict) else None
    if not isinstance(model, dict):
        return [f"{shown}: profile_models: no entry {manifest.model!r}"]
    problems = [] if search.get("model_repository") == "triton" else [f"{shown}: model_repository: 'triton'"]
    if model.get("cpu_only") is not True:
        problems.append(f"{shown}: profile_models.{manifest.model}.cpu_only: true, where it was measured")
    written = config.instance_group[0].count
    counts = ((model.get("model_config_parameters") or {}).get("instance_group") or [{}])[0].get("count", [])
    if written not in counts:
        problems.append(f"{shown}: instance_group count {counts}: leaves out the {written} config.pbtxt holds")
    return problems


def _batching(shown: str, config: mc.ModelConfig, manifest: Manifest, signature: Signature, backend: str) -> list[str]:
    size = config.max_batch_size
    if size < 0:
        return [f"{shown}: max_batch_size {size}: 0 (no batching) or more"]
    problems = []
    if size > 0:
        problem = triton.OPENVINO_BATCH if backend == "openvino" else measured.batch_axis_problem(manifest, signature)
        if problem:
            problems.append(f"{shown}: max_batch_size {size}: must be 0: {problem}")
    if config.HasField("dynamic_batching"):
        batcher = config.dynamic_batching
        if size == 0:
            problems.append(f"{shown}: dynamic_batching: needs max_batch_size above 0")
        for preferred in batcher.preferred_batch_size:
            if not 0 < preferred <= size:
                problems.append(
                    f"{shown}: dynamic_batching.preferred_batch_size {preferred}: not within 1..max_batch_size {size}"
                )
        if batcher.max_queue_delay_microseconds and (
            not batcher.preferred_batch_size or size in batcher.preferred_batch_size
        ):
            problems.append(
                f"{shown}: dynamic_batching.max_queue_delay_microseconds {batcher.max_queue_delay_microseconds}: every "
                "request that cannot fill the batch waits the full delay, and no measurement shows waiting pays "
                f"(batcher.md; {analyzer.FILE} searches delays)"
            )
    return problems


def _tensors(
    shown: str, kind: str, found: Sequence[Any], declared: list[TensorSpec], batched: bool, entry: str
) -> list[str]:
    """Names, data types and dims of the config's inputs (outputs) against the model file's."""
    by_name = {tensor.name: tensor for tensor in declared}
    problems = [
        f"{shown}: {kind} {t.name!r} missing ({entry} has it)"
        for t in declared
        if t.name not in {f.name for f in found}
    ]
    for i, entry_config in enumerate(found):
        name = entry_config.name
        if name not in by_name:
            problems.append(f"{shown}: {kind}[{i}].name {name!r}: not an {kind} of {entry} ({', '.join(by_name)})")
            continue
        tensor = by_name[name]
        data_type = mc.DataType.Name(entry_config.data_type)
        if data_type != triton_type(tensor.datatype):
            problems.append(
                f"{shown}: {kind} {name} data_type {data_type}: {entry} declares {triton_type(tensor.datatype)}"
            )
        dims, reshape = triton.dims(tensor, batched)
        if list(entry_config.dims) != dims:
            without = " without the batch axis (max_batch_size > 0)" if batched else ""
            problems.append(
                f"{shown}: {kind} {name} dims {list(entry_config.dims)}: {entry} declares {tensor.shape}, so {dims}"
                f"{without}"
            )
        if reshape is not None and (not entry_config.HasField("reshape") or list(entry_config.reshape.shape)):
            problems.append(f"{shown}: {kind} {name} reshape: a scalar travels as [1] with reshape {{ shape: [] }}")
    return problems


def _parameters(shown: str, config: mc.ModelConfig, backend: str) -> list[str]:
    known = triton.ORT_PARAMETERS if backend == "onnxruntime" else triton.OPENVINO_PARAMETERS
    problems = (
        [f"{shown}: parameters.PERFORMANCE_HINT: {triton.STREAMS_NOT_HINT}"]
        if _both_hint_and_streams(config.parameters)
        else []
    )
    for key, value in config.parameters.items():
        if key not in known:
            problems.append(f"{shown}: parameters.{key}: not a key the {backend} backend reads (it would be ignored)")
        elif key.endswith(("thread_count", "NUM_THREADS")) and not value.string_value.isdigit():
            problems.append(f"{shown}: parameters.{key} {value.string_value!r}: a thread count (0 or more)")
    return problems


def _both_hint_and_streams(settings: Any) -> bool:
    return "PERFORMANCE_HINT" in settings and "NUM_STREAMS" in settings


def check_ovms(repo_dir: Path, manifest: Manifest) -> list[str]:
    """serving/ovms/config.json against OVMS's schema, the version folder and the measured settings."""
    import jsonschema

    shown = f"{repo_dir.name}/{ovms.CONFIG}"
    try:
        config = json.loads((repo_dir / ovms.CONFIG).read_text())
    except FileNotFoundError:
        return [f"{shown}: missing"]
    except json.JSONDecodeError as error:
        return [f"{shown}: not JSON ({error})"]
    validator = jsonschema.Draft7Validator(json.loads(ovms.SCHEMA.read_text()))
    errors = sorted(validator.iter_errors(config), key=lambda e: e.json_path)
    if errors:
        return [f"{shown}: {e.json_path}: {e.message} (OVMS's config schema)" for e in errors]
    entries = [e["config"] for e in config["model_config_list"] if e["config"]["name"] == manifest.model]
    if len(entries) != 1:
        return [f"{shown}: model_config_list: {len(entries)} models named {manifest.model!r}, not one"]
    entry, problems = entries[0], []
    base = entry.get("base_path", "")
    folder = repo_dir / base
    if not base or Path(base).is_absolute() or "://" in base:
        problems.append(f"{shown}: base_path {base!r}: relative to config.json's folder, so it works wherever mounted")
    elif not (folder / VERSION).is_dir():
        problems.append(
            f"{shown}: base_path {base!r}: no version folder {base}/{VERSION}/ beside config.json (OVMS resolves a "
            "relative base_path against config.json's folder)"
        )
    else:
        problems += file_problems(folder / VERSION, manifest, f"{repo_dir.name}/{base}/{VERSION}")
    if entry.get("target_device") != "CPU":
        problems.append(f"{shown}: target_device {entry.get('target_device')!r}: CPU, where it was measured")
    nireq, plugin, why = ovms.settings(manifest)
    if entry.get("nireq") != nireq:
        problems.append(f"{shown}: nireq {entry.get('nireq')!r}: {why['nireq']}")
    written = entry.get("plugin_config", {})
    if _both_hint_and_streams(written):
        problems.append(f"{shown}: plugin_config.PERFORMANCE_HINT: {triton.STREAMS_NOT_HINT}")
    for key in sorted(set(plugin) | set(written)):
        if written.get(key) != plugin.get(key):
            expected = f"measured {plugin[key]!r}" if key in plugin else "not a measured setting"
            problems.append(f"{shown}: plugin_config.{key} {written.get(key)!r}: {expected}")
    return problems


def _megabytes(quantity: object) -> float | None:
    match = QUANTITY.match(str(quantity))
    return float(match.group(1)) * SCALE[match.group(2)] if match else None


def check_kserve(path: Path, manifest: Manifest) -> list[str]:
    """serving/kserve/<engine>.yaml: an InferenceService KServe accepts, sized as measured."""
    engine, shown = path.stem, f"{path.parent.name}/{path.name}"
    try:
        service = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        return [f"{shown}: missing"]
    except yaml.YAMLError as error:
        return [f"{shown}: not YAML ({error})"]
    if not isinstance(service, dict):
        return [f"{shown}: not a mapping"]
    problems = []
    if service.get("apiVersion") != kserve.API_VERSION:
        problems.append(f"{shown}: apiVersion {service.get('apiVersion')!r}: {kserve.API_VERSION}")
    if service.get("kind") != kserve.KIND:
        problems.append(f"{shown}: kind {service.get('kind')!r}: {kserve.KIND}")
    name = str((service.get("metadata") or {}).get("name", ""))
    if not kserve.NAME.match(name) or len(name) > 63:
        problems.append(f"{shown}: metadata.name {name!r}: KServe takes a DNS-1035 label ([a-z]([-a-z0-9]*[a-z0-9])?)")
    elif name != kserve.isvc_name(manifest.model, engine):
        problems.append(
            f"{shown}: metadata.name {name!r}: {kserve.isvc_name(manifest.model, engine)!r}, the engine's own (one "
            "name for both files: applying the second replaces the first)"
        )
    model = ((service.get("spec") or {}).get("predictor") or {}).get("model") or {}
    if not model:
        return [*problems, f"{shown}: spec.predictor.model: missing"]
    if model.get("protocolVersion") != "v2":
        problems.append(f"{shown}: spec.predictor.model.protocolVersion {model.get('protocolVersion')!r}: v2")
    if model.get("runtime") != kserve.RUNTIME.get(engine):
        problems.append(f"{shown}: spec.predictor.model.runtime {model.get('runtime')!r}: {kserve.RUNTIME.get(engine)}")
    fmt = (model.get("modelFormat") or {}).get("name")
    if fmt != kserve.model_format(engine, manifest):
        problems.append(
            f"{shown}: spec.predictor.model.modelFormat.name {fmt!r}: {kserve.model_format(engine, manifest)}"
        )
    if not isinstance(model.get("storageUri"), str) or not model["storageUri"]:
        problems.append(f"{shown}: spec.predictor.model.storageUri: missing")
    return problems + _resources(shown, model.get("resources") or {}, manifest)


def _resources(shown: str, resources: dict, manifest: Manifest) -> list[str]:
    threads = measured.concurrency(manifest).total_threads
    peak, _ = measured.peak_rss_mb(manifest)
    problems = []
    for part in ("requests", "limits"):
        amounts = resources.get(part) or {}
        where = f"{shown}: spec.predictor.model.resources.{part}"
        if str(amounts.get("cpu")) != str(threads):
            problems.append(f"{where}.cpu {amounts.get('cpu')!r}: {threads}, the threads measured")
        memory = _megabytes(amounts.get("memory"))
        if memory is None or memory < peak:
            problems.append(f"{where}.memory {amounts.get('memory')!r}: at least the measured peak RSS {peak:.0f}M")
    return problems
