"""KServe InferenceServices (serving.kserve.io/v1beta1) for the Triton and OVMS repositories:
serving/kserve/triton.yaml and ovms.yaml, resources from the measured footprint.

Runtimes: kserve-tritonserver (KServe's config/runtimes: `tritonserver --model-store=/mnt/models`, so the
storage holds the Triton repository root) and kserve-openvino (OVMS's ServingRuntime, not installed with
KServe: `ovms --model_name={{.Name}} --model_path=/mnt/models`, so the storage holds the model folder with
1/ inside, and the settings go in as arguments). storageUri is a placeholder the user replaces.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from pipeline.core.files import write_text
from pipeline.core.records.manifest import Manifest
from pipeline.serve.repositories import measured, ovms
from pipeline.serve.repositories.artifact import VERSION, artifact_files

API_VERSION = "serving.kserve.io/v1beta1"
KIND = "InferenceService"
RUNTIME = {"triton": "kserve-tritonserver", "ovms": "kserve-openvino"}
NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")  # KServe's IsvcNameFmt (a DNS-1035 label)
PLACEHOLDER = "s3://REPLACE-WITH-YOUR-BUCKET"


def isvc_name(model: str, engine: str) -> str:
    """The InferenceService's name: the model's as KServe takes it (lower case, '-' for '_', a letter
    first) and the engine's, so that applying both files makes two services, at most 63 characters."""
    name = model.lower().replace("_", "-").strip("-")
    name = name if name[:1].isalpha() else f"model-{name}"
    return f"{name[: 62 - len(engine)].rstrip('-')}-{engine}"


def model_format(engine: str, manifest: Manifest) -> str:
    """kserve-tritonserver takes `onnx`, and `triton` for a repository on another backend (OpenVINO IR);
    kserve-openvino takes `openvino` (IR) and `onnx`."""
    if manifest.runtime == "onnxruntime" or manifest.entry.endswith(".onnx"):
        return "onnx"
    return "triton" if engine == "triton" else "openvino"


def resources(manifest: Manifest) -> tuple[dict, list[str]]:
    found = measured.concurrency(manifest)
    memory, memory_why = measured.memory_mb(manifest)
    amounts = {"cpu": str(found.total_threads), "memory": f"{memory}M"}
    notes = [
        f"resources cpu {found.total_threads}: the threads of the concurrent measurement ({found.text})",
        f"resources memory {memory}M: {memory_why}",
    ]
    return {"requests": dict(amounts), "limits": dict(amounts)}, notes


def inference_service(engine: str, manifest: Manifest) -> tuple[dict, list[str]]:
    """The InferenceService and its header comments."""
    name = isvc_name(manifest.model, engine)
    model: dict = {
        "modelFormat": {"name": model_format(engine, manifest)},
        "runtime": RUNTIME[engine],
        "protocolVersion": "v2",
        "storageUri": f"{PLACEHOLDER}/{manifest.model}/{engine}",
    }
    uploaded, served_as, extra = f"serving/triton/ (the repository root holding {manifest.model}/)", manifest.model, []
    if engine == "ovms":
        uploaded, served_as = f"serving/ovms/{manifest.model}/ (the folder holding {VERSION}/)", name
        nireq, plugin, _ = ovms.settings(manifest)
        compact = json.dumps(plugin, separators=(",", ":"))
        model["args"] = ["--target_device=CPU", f"--nireq={nireq}", f"--plugin_config={compact}"]
        extra = [
            "runtime kserve-openvino is OVMS's ServingRuntime, not installed with KServe: apply "
            "openvinotoolkit/model_server's extras/kserve/kserve-openvino.yaml first",
            "args: ovms/config.json's nireq and plugin_config (ovms/provenance.json names their measurements)",
        ]
    model["resources"], sizing = resources(manifest)
    notes = [
        f"KServe InferenceService for {manifest.model} (variant {manifest.variant}, measured on {manifest.machine}) "
        f"on {RUNTIME[engine]}",
        f"storageUri is a placeholder: upload deploy/{manifest.model}/{uploaded} and put its URI there",
        f"served as {served_as}: POST /v2/models/{served_as}/infer (Open Inference Protocol, v2)",
        *(f"sha256 {VERSION}/{n} {manifest.files[n]}" for n in artifact_files(manifest)),
        *extra,
        *sizing,
    ]
    spec = {"predictor": {"model": model}}
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": name}, "spec": spec}, notes


def write_kserve(manifest: Manifest, serving: Path, engines: list[str]) -> str:
    """serving/kserve/<engine>.yaml for each engine written; returns a one-line summary."""
    for engine in engines:
        service, notes = inference_service(engine, manifest)
        text = "".join(f"# {line}\n" for line in notes) + yaml.safe_dump(service, sort_keys=False)
        write_text(serving / "kserve" / f"{engine}.yaml", text)
    return ", ".join(f"kserve/{engine}.yaml" for engine in engines)
