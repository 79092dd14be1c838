"""An OpenVINO Model Server repository: serving/ovms/config.json, the artifact in <model>/1/, and
provenance.json beside them.

OVMS's config schema (src/schema.cpp, vendored as ovms_config_schema.json) allows no key it does
not know, so the sha256 and where each setting came from go in provenance.json, not config.json.
`base_path` is relative: OVMS resolves it against config.json's folder (FileSystem::setPath with
the config's directory as root), so the folder works wherever it is mounted. OVMS runs ONNX files
with OpenVINO, not ONNX Runtime: an ONNX Runtime artifact is written only when OpenVINO reads it,
and its provenance says its figures are ONNX Runtime's.
"""

from __future__ import annotations

from pathlib import Path

from pipeline.core.errors import first_line
from pipeline.core.files import write_json
from pipeline.core.records.manifest import Manifest
from pipeline.serve.repositories import measured
from pipeline.serve.repositories.artifact import VERSION, artifact_files, place
from pipeline.serve.repositories.scope import NotServable

CONFIG = "config.json"
PROVENANCE = "provenance.json"
SCHEMA = Path(__file__).with_name("ovms_config_schema.json")


def settings(manifest: Manifest) -> tuple[int, dict[str, str], dict[str, str]]:
    """nireq, plugin_config and, per setting, the measurement it comes from."""
    found = measured.concurrency(manifest)
    why = {"nireq": f"{found.requests}: the concurrent measurement ran {found.text} ({found.how})"}
    if manifest.runtime != "openvino":
        plugin = {
            "INFERENCE_NUM_THREADS": str(found.total_threads),
            "NUM_STREAMS": str(found.requests),
            "INFERENCE_PRECISION_HINT": "f32",
        }
        why["INFERENCE_NUM_THREADS"] = f"{found.total_threads}: the thread budget of the concurrent measurement"
        why["NUM_STREAMS"] = (
            f"{found.requests}: one stream per infer request, so the nireq requests run side by side as "
            f"{manifest.runtime}'s {found.requests} sessions did"
        )
        why["INFERENCE_PRECISION_HINT"] = (
            f"f32: the figures and fidelity are {manifest.runtime}'s in FP32 compute; OpenVINO's CPU default is bf16 "
            "on a CPU with AMX or native BF16"
        )
        return found.requests, plugin, why
    settings = measured.openvino_plugin(manifest)
    plugin = {"INFERENCE_NUM_THREADS": str(settings.threads)}
    why["INFERENCE_NUM_THREADS"] = f"{settings.threads}: the concurrent measurement's compiled model"
    if settings.streams is not None:
        plugin["NUM_STREAMS"] = str(settings.streams)
        why["NUM_STREAMS"] = (
            f"{settings.streams}: the streams the THROUGHPUT hint made on {manifest.machine}, written without the "
            "hint (OVMS's performance tuning guide: not both)"
        )
    if settings.precision:
        plugin["INFERENCE_PRECISION_HINT"] = settings.precision
        why["INFERENCE_PRECISION_HINT"] = f"{settings.precision}: the precision the measured run computed in"
    if settings.group_size is not None:
        plugin["DYNAMIC_QUANTIZATION_GROUP_SIZE"] = str(settings.group_size)
        why["DYNAMIC_QUANTIZATION_GROUP_SIZE"] = f"{settings.group_size}: the group size the measured run used"
    return found.requests, plugin, why


def refuse_unreadable(folder: Path, manifest: Manifest) -> None:
    """NotServable when this machine's OpenVINO (OVMS's engine) cannot read an ONNX artifact: the check
    left when no release's own OpenVINO ran it (serving.check_versions false)."""
    import openvino as ov

    if manifest.runtime == "openvino":
        return
    try:
        ov.Core().read_model(str(folder / manifest.entry))
    except Exception as error:
        why = first_line(error)
        raise NotServable(f"OVMS runs ONNX with OpenVINO, which cannot read {manifest.entry}: {why}") from None


def config_json(manifest: Manifest) -> dict:
    nireq, plugin, _ = settings(manifest)
    config = {"name": manifest.model, "base_path": manifest.model, "target_device": "CPU", "nireq": nireq}
    return {"model_config_list": [{"config": config | {"plugin_config": plugin}}]}


def provenance(manifest: Manifest) -> dict:
    _, _, why = settings(manifest)
    note = (
        f"measured as {manifest.runtime} {manifest.runtime_version} on {manifest.machine}"
        if manifest.runtime == "openvino"
        else f"OVMS runs this ONNX file with OpenVINO; the figures behind variant {manifest.variant} are "
        f"{manifest.runtime}'s. The pipeline measured OpenVINO on this model as its openvino_* variants (their own "
        "IR), not this file"
    )
    return {
        "model": manifest.model,
        "variant": manifest.variant,
        "machine": manifest.machine,
        "runtime": f"{manifest.runtime} {manifest.runtime_version}",
        "note": note,
        "sha256": {f"{manifest.model}/{VERSION}/{name}": manifest.files[name] for name in artifact_files(manifest)},
        "settings": why,
        "why_this_file": "config.json takes no key OVMS does not know (its schema: additionalProperties false)",
    }


def pinned_properties(manifest: Manifest) -> dict[str, str]:
    """The plugin_config settings that change what OpenVINO computes (what the release check compiles with)."""
    _, plugin, _ = settings(manifest)
    return {k: v for k, v in plugin.items() if k in ("INFERENCE_PRECISION_HINT", "DYNAMIC_QUANTIZATION_GROUP_SIZE")}


def write_ovms(folder: Path, manifest: Manifest, serving: Path, checked: str) -> str:
    """serving/ovms/: config.json, <model>/1/ and provenance.json; returns a one-line summary."""
    root = serving / "ovms"
    place(folder, manifest, root / manifest.model / VERSION)
    config = config_json(manifest)
    write_json(root / CONFIG, config)
    write_json(root / PROVENANCE, provenance(manifest) | {"checked_with": checked})
    entry = config["model_config_list"][0]["config"]
    plugin = ", ".join(f"{key} {value}" for key, value in entry["plugin_config"].items())
    return f"ovms/{CONFIG} (nireq {entry['nireq']}, {plugin})"
