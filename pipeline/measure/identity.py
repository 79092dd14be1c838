"""Is this the same model as that one? A signature of what a runtime would execute.

Two variants can be one model: accuracy control that reverted nothing writes the quantized IR
again, weights byte for byte, with other generated layer names and its settings in rt_info. Timing
both would rank noise, so the select stage measures such variants once. The signature hashes every
file of the artifact but the build record, with what does not execute left out: OpenVINO IR names
and rt_info, ONNX doc strings, metadata, producer and node names. The runtime and its settings count.
"""

from __future__ import annotations

import hashlib
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import onnx

from pipeline.core import layout
from pipeline.core.files import iter_files
from pipeline.core.records import build as build_record


def _openvino_xml(path: Path) -> bytes:
    tree = ET.parse(path)
    for parent in tree.iter():
        for child in [c for c in parent if c.tag == "rt_info"]:
            parent.remove(child)
    for layer in tree.iter("layer"):
        if layer.get("type") not in ("Parameter", "Result"):  # inputs and outputs keep their names
            layer.attrib.pop("name", None)
    return ET.tostring(tree.getroot())


def _onnx(path: Path) -> bytes:
    model = onnx.load(str(path), load_external_data=False)
    model.doc_string = model.producer_name = model.producer_version = ""
    del model.metadata_props[:]
    model.graph.doc_string = ""
    for node in model.graph.node:
        node.name = node.doc_string = ""
    return model.SerializeToString(deterministic=True)


def signature(artifact: Path) -> str:
    """sha256 over the artifact's executable content and its runtime settings."""
    build = build_record.load(artifact)
    digest = hashlib.sha256(json.dumps([build.runtime, build.runtime_config.as_dict()], sort_keys=True).encode())
    for path in sorted(iter_files(artifact)):
        relative = path.relative_to(artifact).as_posix()
        if relative == layout.BUILD_INFO:
            continue
        content = _openvino_xml(path) if path.suffix == ".xml" else _onnx(path) if path.suffix == ".onnx" else None
        digest.update(relative.encode())
        digest.update(hashlib.sha256(content if content is not None else path.read_bytes()).digest())
    return digest.hexdigest()
