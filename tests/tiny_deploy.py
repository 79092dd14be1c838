"""Deploy folders of a tiny token encoder (token ids, a mask, token types and a float input), one
per runtime, packaged by the select stage's own code: what predict's and the server's tests run."""

from __future__ import annotations

import shutil
from pathlib import Path

from pipeline.core import layout
from pipeline.core.config import InputSpec, Params
from pipeline.core.data import generate_inputs
from pipeline.core.records import manifest as manifest_record
from pipeline.core.records.manifest import Manifest
from pipeline.decide.deploy import _package
from tests.helpers import metric, write_build, write_source

VOCAB, TYPES, SEQ = 50, 2, 6
SPEC = {
    "input_ids": {"shape": ["batch", "seq"], "dtype": "int64", "kind": "token_ids", "high": VOCAB},
    "attention_mask": {"shape": ["batch", "seq"], "dtype": "int64", "kind": "attention_mask"},
    "token_type_ids": {"shape": ["batch", "seq"], "dtype": "int64", "kind": "token_type_ids"},
    "scale": {"shape": ["batch", 1], "dtype": "float32"},
}
SPECS = {name: InputSpec.model_validate(spec) for name, spec in SPEC.items()}
# as the bench records it: two batch-1 requests in flight on 2 threads
CONCURRENT = {"sps": 1000.0, "batch": 1, "total_threads": 2, "harness_limit_sps": 40000.0, "harness_bound": False,
              "requests": 2, "how": "a thread per request"}  # fmt: skip
VARIANTS = {  # variant: (runtime, entry, runtime_config)
    "onnx_fp32": ("onnxruntime", "model.onnx", {}),
    "openvino_fp16": ("openvino", "model.xml", {"inference_precision": "auto"}),
}


def export_tiny_encoder(path: Path) -> None:
    """Word and type embeddings, mean-pooled under the mask, times a float input."""
    import torch
    from torch import Tensor

    class Encoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.words, self.types = torch.nn.Embedding(VOCAB, 8), torch.nn.Embedding(TYPES, 8)

        def forward(self, input_ids: Tensor, attention_mask: Tensor, token_type_ids: Tensor, scale: Tensor) -> Tensor:
            mask = attention_mask.unsqueeze(-1).float()
            pooled = ((self.words(input_ids) + self.types(token_type_ids)) * mask).sum(1) / mask.sum(1).clamp(min=1)
            return pooled * scale

    torch.manual_seed(0)
    example = tuple(torch.from_numpy(v) for v in generate_inputs(SPECS, 2, 0, {"seq": SEQ}).values())
    axes = {name: {0: "batch", 1: "seq"} for name in SPEC} | {"scale": {0: "batch"}, "embedding": {0: "batch"}}
    torch.onnx.export(Encoder().eval(), example, str(path), input_names=list(SPEC), output_names=["embedding"],
                      dynamic_axes=axes, dynamo=False)  # fmt: skip


def tok_params() -> Params:
    entry = {"source": "onnx", "file": "model.onnx", "inputs": SPEC, "outputs": ["embedding"], "dims": {"seq": SEQ}}
    variants = {variant: {} for variant in VARIANTS}
    return Params.model_validate({"models": ["tok"], "catalog": {"tok": entry}, "variants": variants})


def deploy_folders(root: Path) -> dict[str, Path]:
    """deploy/ folders of a tiny token encoder, one per runtime, packaged by the select stage's code
    from a source.json that records the token bounds as the export does."""
    import openvino as ov

    source = layout.source_dir("tok", root)
    source.mkdir(parents=True)
    export_tiny_encoder(source / layout.EXPORTED_ONNX)
    write_source(root, "tok", inputs=SPEC, dims={"seq": SEQ}, output_names=["embedding"],
                 token_bounds={"input_ids": VOCAB, "token_type_ids": TYPES})  # fmt: skip
    folders = {}
    for variant, (runtime, entry, config) in VARIANTS.items():
        artifact = layout.variant_dir("tok", variant, root)
        artifact.mkdir(parents=True)
        if runtime == "openvino":
            ov.save_model(ov.convert_model(source / layout.EXPORTED_ONNX), artifact / entry, compress_to_fp16=True)
        else:
            shutil.copy(source / layout.EXPORTED_ONNX, artifact / entry)
        write_build(artifact, entry=entry, runtime=runtime, runtime_config=config)
        out = root / "deploy" / variant
        out.mkdir(parents=True)
        record = metric(1.0, runtime=runtime, precision="fp32", throughput_concurrent=CONCURRENT)
        package = _package("tok", artifact, record, tok_params(), root, out)
        manifest_record.write(Manifest(model="tok", variant=variant, machine="here", **package), out)
        folders[variant] = out
    return folders
