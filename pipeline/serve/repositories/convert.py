"""An ONNX artifact an engine release cannot read, converted to an older opset by ONNX's own version
converter (onnx.version_converter) and checked again in that release's runtime: the repository then
serves the converted file, and says so; the deploy folder keeps the file the pipeline measured.

Only a whole-file ONNX model: OpenVINO IR cannot be re-saved for an older OpenVINO here (that needs the
model it was converted from), and a model with external weights keeps its tensors outside the proto.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from pipeline.core.files import sha256
from pipeline.core.records.manifest import Manifest
from pipeline.serve.repositories.versions import ReleaseCheck

STEPS = 4  # opsets tried below the file's own, newest first: each try is one run in the release's runtime


def convertible(manifest: Manifest) -> bool:
    return manifest.entry.endswith(".onnx") and list(manifest.files) == [manifest.entry]


def downgraded(
    folder: Path, manifest: Manifest, out: Path, check: Callable[[Path, Manifest], ReleaseCheck]
) -> tuple[Path, Manifest, ReleaseCheck, str] | None:
    """The newest older opset whose conversion `check` finds readable: its folder, manifest (the
    converted file's sha256), check and a sentence saying what was converted; None when none is."""
    import onnx
    from onnx import helper, version_converter

    model = onnx.load(str(folder / manifest.entry))
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    if opset is None:
        return None
    out.mkdir(parents=True, exist_ok=True)
    for target in range(opset - 1, opset - 1 - STEPS, -1):
        try:
            converted = version_converter.convert_version(model, target)
        except Exception:  # no adapter for an operator at this step: older opsets cannot do better
            break
        converted.ir_version = helper.find_min_ir_version_for(list(converted.opset_import), ignore_unknown=True)
        path = out / manifest.entry
        onnx.save(converted, str(path))
        files = {manifest.entry: sha256(path)}
        moved = manifest.model_copy(update={"files": files})
        result = check(out, moved)
        if result.status != "unreadable":
            how = (
                f"converted: {manifest.entry} from opset {opset} (IR {model.ir_version}) to opset {target} (IR "
                f"{converted.ir_version}) by onnx.version_converter; the pipeline measured the opset-{opset} file"
            )
            return out, moved, result, how
    shutil.rmtree(out, ignore_errors=True)
    return None
