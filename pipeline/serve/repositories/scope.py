"""Which deploy folders a model repository can serve as they are, and why not the others."""

from __future__ import annotations

from pathlib import Path

from pipeline.core.onnx_files import CONTRIB_DOMAIN
from pipeline.core.records.manifest import Manifest

ENGINES = ("triton", "ovms", "kserve")
SERVED_RUNTIMES = ("onnxruntime", "openvino")  # ONNX files and OpenVINO IR: what Triton and OVMS load


class NotServable(Exception):
    """One engine cannot serve this artifact as it is; the message says why in one line."""


def why_not(manifest: Manifest) -> str | None:
    """Why no engine here serves `manifest`'s artifact as it is (None: they may)."""
    if not manifest.variant:
        return f"no artifact was chosen ({manifest.selection.why or 'see the manifest'})"
    if manifest.context is not None:
        return (
            f"a text-generation decoder ({manifest.runtime}): its generation loop (KV cache, one call per token) "
            "runs around the model, not in a single-pass model repository"
        )
    if manifest.code:
        return f"a code package ({manifest.runtime}, {manifest.code}/): Python code the engines do not run"
    if manifest.runtime not in SERVED_RUNTIMES:
        return f"runtime {manifest.runtime}: these repositories serve ONNX (onnxruntime) and OpenVINO IR only"
    if manifest.device != "cpu":
        return f"measured on {manifest.device}: the settings written here are CPU ones (instance kind KIND_CPU)"
    if manifest.metrics is None or manifest.metrics.latency_ms is None:
        return "the manifest holds no measurements to set the server from"
    return None


def needs_extensions(folder: Path, manifest: Manifest) -> str | None:
    """Why no engine here serves an ONNX graph holding onnxruntime-extensions' operators (tf2onnx's text operators;
    None: it holds none)."""
    if not manifest.entry.endswith(".onnx"):
        return None
    import onnx

    graph = onnx.load(str(folder / manifest.entry), load_external_data=False).graph
    if not (operators := sorted({node.op_type for node in graph.node if node.domain == CONTRIB_DOMAIN})):
        return None
    return (
        f"its graph holds onnxruntime-extensions' operators ({', '.join(operators)}): Triton's onnxruntime backend "
        "loads them only from a library path on the server (model_operations.op_library_filename), which this "
        "repository cannot know, and OVMS reads none; `python -m pipeline serve` registers them"
    )
