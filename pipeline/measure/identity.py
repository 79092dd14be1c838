"""Is this the same model as that one? A signature of what a runtime would execute.

Two variants can be one model: accuracy control that reverted nothing writes the quantized IR
again, weights byte for byte, with other generated layer names and its settings in rt_info. Timing
both would rank noise, so the select stage measures such variants once. The signature hashes every
file of the artifact but the build record, with what does not execute left out: OpenVINO IR names
and rt_info, ONNX doc strings, metadata, producer and node names. The runtime and its settings count.

An ONNX file for ONNX Runtime on the CPU is hashed as ONNX Runtime runs it: the graph its optimizations
at load leave (the session's `optimized_model_filepath`), every tensor renamed by where it first appears.
`onnx_opt` is ONNX Runtime's own optimized save of `onnx_fp32`, and the two often load into one graph
(spam_fnn's six FusedGemm nodes): such a pair is one contender, not two processes' draws raced against
each other (genomad's read x1.42 apart, one ensemble).
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
    return _stripped(onnx.load(str(path), load_external_data=False)).SerializeToString(deterministic=True)


def _canonical(model: onnx.ModelProto) -> bytes:
    """The graph with every tensor but the graph's inputs and outputs renamed by where it first appears (a
    node's inputs, then its outputs, in node order), each node's attributes by name, its value_info dropped:
    names and orders that do not execute."""
    graph = model.graph
    kept = {v.name for v in [*graph.input, *graph.output]}
    names: dict[str, str] = {}
    for node in graph.node:
        for name in [*node.input, *node.output]:
            if name and name not in kept:
                names.setdefault(name, f"t{len(names)}")
    for node in graph.node:
        node.input[:] = [names.get(n, n) for n in node.input]
        node.output[:] = [names.get(n, n) for n in node.output]
        node.attribute.sort(key=lambda a: a.name)  # ONNX Runtime saves a node's attributes in no fixed order
    for tensor in graph.initializer:
        tensor.name = names.get(tensor.name, tensor.name)
    graph.initializer.sort(key=lambda t: t.name)
    del graph.value_info[:]
    graph.name = ""
    return model.SerializeToString(deterministic=True)


def _executed_onnx(path: Path) -> bytes | None:
    """What ONNX Runtime's CPU provider runs for this file, as `_canonical` bytes; None where it cannot save
    its optimized graph (the file is then hashed as written)."""
    from pipeline.runtimes.ort import graph_as_run

    try:
        return _canonical(_stripped(graph_as_run(path)))
    except Exception:  # external weights, an unsavable graph: the file's own hash decides
        return None


def _stripped(model: onnx.ModelProto) -> onnx.ModelProto:
    model.doc_string = model.producer_name = model.producer_version = ""
    del model.metadata_props[:]
    model.graph.doc_string = ""
    for node in model.graph.node:
        node.name = node.doc_string = ""
    return model


def _content(path: Path, executed: bool) -> bytes | None:
    """What of a file executes (None: all of it, its bytes); `executed`: an ONNX file as ONNX Runtime's CPU
    provider runs it."""
    if path.suffix == ".xml":
        return _openvino_xml(path)
    if path.suffix == ".onnx":
        return (executed and _executed_onnx(path)) or _onnx(path)
    return None


def signature(artifact: Path) -> str:
    """sha256 over the artifact's executable content and its runtime settings."""
    build = build_record.load(artifact)
    digest = hashlib.sha256(json.dumps([build.runtime, build.runtime_config.as_dict()], sort_keys=True).encode())
    executed = build.runtime == "onnxruntime" and build.target == "cpu"
    for path in sorted(iter_files(artifact)):
        relative = path.relative_to(artifact).as_posix()
        if relative == layout.BUILD_INFO:
            continue
        content = _content(path, executed)
        digest.update(relative.encode())
        digest.update(hashlib.sha256(content if content is not None else path.read_bytes()).digest())
    return digest.hexdigest()
