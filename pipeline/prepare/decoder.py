"""The export stage of a text-generation model (task: text-generation, a Hugging Face causal LM folder).

Writes artifacts/<model>/source/ atomically:
  hf/             the model folder as given (config, weights, tokenizer): what every variant builds from
  reference.npz   the held-out windows of token ids every variant is scored on, with the FP32
                  source's next-token choice and log-likelihood at every position, and its logits
                  (float16) on the first rows, for the logit cosine
  source.json     what build and bench read: the architecture, its KV-cache shape, the context length

The source must be a decoder with a KV-cache path: loaded as a causal LM, a forward pass with
`use_cache=True` must return past key/values that a next-token pass accepts and that reproduce the
full pass's logits. Anything else fails here with one line naming the file and the field.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.core import layout
from pipeline.core.config import PARAMS_FILE, InputSpec, ModelConfig, Params
from pipeline.core.data import DataSet
from pipeline.core.errors import ModelFileError, first_line
from pipeline.core.files import atomic_dir, tree_digest, write_json
from pipeline.core.inputs import load_user_data
from pipeline.core.layout import model_dir
from pipeline.core.model_code import import_object
from pipeline.core.records import source as source_record
from pipeline.core.records.source import Family, HeldOut, SourceRecord

LOGIT_VALUES = 8_000_000  # float16 logits kept for the cosine: at most this many values (16 MB)
COPIED = ("*.json", "*.safetensors", "*.bin", "*.model", "*.txt", "*.py")


def load_causal_lm(folder: Path, field: str) -> Any:
    """The FP32 model of a Hugging Face folder, or one error naming the folder and the field."""
    import torch
    from transformers import AutoModelForCausalLM

    if not (folder / "config.json").exists():
        raise ModelFileError(f"{folder}: no config.json: not a Hugging Face model folder ({PARAMS_FILE}: {field})")
    try:
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, local_files_only=True)
    except (ValueError, OSError, KeyError) as error:
        raise ModelFileError(
            f"{folder}: not a causal language model ({PARAMS_FILE}: {field}): {first_line(error)}"
        ) from None
    return model.eval()


def require_kv_cache(model: Any, folder: Path, field: str) -> str:
    """Prove the decoder's KV-cache path: prefill, then one cached step, equal to the full pass."""
    import torch

    ids = torch.arange(1, 9).unsqueeze(0) % model.config.vocab_size
    with torch.no_grad():
        try:
            prefill = model(input_ids=ids[:, :-1], use_cache=True)
        except Exception as error:
            raise ModelFileError(
                f"{folder}: the model's forward pass fails ({PARAMS_FILE}: {field}): {first_line(error)}"
            ) from None
        cache = getattr(prefill, "past_key_values", None)
        if cache is None:
            raise ModelFileError(
                f"{folder}: no KV-cache path: a forward pass with use_cache=True returns no past_key_values "
                f"({PARAMS_FILE}: {field}); text-generation variants need a decoder that caches keys and values"
            )
        step = model(input_ids=ids[:, -1:], past_key_values=cache, use_cache=True).logits[:, -1]
        full = model(input_ids=ids).logits[:, -1]
    diff = float((step - full).abs().max())
    if diff > 1e-3 * max(1.0, float(full.abs().max())):
        raise ModelFileError(
            f"{folder}: the KV-cache path disagrees with the full pass (max abs diff {diff:.3g}) "
            f"({PARAMS_FILE}: {field})"
        )
    return f"ok: prefill + 1 cached step equals the full pass (max abs diff {diff:.2g})"


def token_windows(name: str, params: Params, root: Path, vocab: int, seq: int) -> DataSet:
    """The scoring rows: the catalog's eval_data (`input_ids` [rows, seq]), else seeded random ids
    (then perplexity is only relative: the variants against the source on the same ids)."""
    config = params.model(name)
    if config.eval_data:
        path, field = model_dir(name, root) / config.eval_data, f"catalog.{name}.eval_data"
        data = load_user_data(path, config.inputs, field, {"input_ids": vocab})  # ids within the vocabulary
        return data.head(params.bench.generation.quality_rows)
    rows = params.bench.generation.quality_rows
    ids = np.random.default_rng(params.export.seed).integers(1, vocab, (rows, seq), dtype=np.int64)
    return DataSet({"input_ids": ids}, origin=f"random token ids ({rows} rows of {seq}, seed {params.export.seed})")


def reference_outputs(model: Any, ids: np.ndarray) -> dict[str, np.ndarray]:
    """The source's next-token choice (`top1`) and log-likelihood of the true next token (`logprob`)
    at every position, and float16 logits of the first rows (`logits`) for the cosine."""
    import torch

    top1, logprob, logits = [], [], []
    keep_rows = max(1, LOGIT_VALUES // (ids.shape[1] * model.config.vocab_size))
    with torch.no_grad():
        for i, row in enumerate(ids):
            out = model(input_ids=torch.from_numpy(row[None])).logits[0].float()
            top1.append(out.argmax(-1).numpy())
            logprob.append(
                torch.log_softmax(out[:-1], -1).gather(1, torch.from_numpy(row[1:, None])).squeeze(1).numpy()
            )
            if i < keep_rows:
                logits.append(out.numpy().astype(np.float16))
    return {"top1": np.stack(top1), "logprob": np.stack(logprob), "logits": np.stack(logits)}


def architecture(config: Any) -> Family:
    """What the builds and the KV-cache figure need from the model's config."""
    heads = config.num_attention_heads
    return Family(
        model_type="decoder",
        architecture=(config.architectures or [type(config).__name__])[0],
        hf_model_type=config.model_type,
        layers=config.num_hidden_layers,
        heads=heads,
        kv_heads=getattr(config, "num_key_value_heads", None) or heads,
        head_dim=getattr(config, "head_dim", None) or config.hidden_size // heads,
        hidden_size=config.hidden_size,
        vocab_size=config.vocab_size,
        context=getattr(config, "max_position_embeddings", None),
    )


def from_factory(name: str, config: ModelConfig, root: Path, out: Path) -> Path:
    """A factory's seeded model and tokenizer (`catalog.<name>.factory` returns both), saved as a
    Hugging Face folder `out`: a code model goes through the same path as a folder of files."""
    import torch

    build = import_object(config.factory or "", root, f"catalog.{name}.factory")
    torch.manual_seed(config.init_seed)
    model, tokenizer = build(**config.factory_args)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def export_decoder(name: str, params: Params, root: Path) -> dict[str, Any]:
    config = params.model(name)
    field = f"catalog.{name}.{'file' if config.file else 'factory'}"
    with tempfile.TemporaryDirectory() as built:
        folder = model_dir(name, root) / config.file if config.file else from_factory(name, config, root, Path(built))
        return export_folder(name, params, root, folder, field)


def export_folder(name: str, params: Params, root: Path, folder: Path, field: str) -> dict[str, Any]:
    config = params.model(name)
    if not folder.is_dir():
        raise ModelFileError(f"{folder}: not found ({PARAMS_FILE}: {field})")
    if not (folder / "tokenizer.json").exists():
        raise ModelFileError(
            f"{folder}: no tokenizer.json: generation needs the model's tokenizer ({PARAMS_FILE}: {field})"
        )
    start = time.perf_counter()
    model = load_causal_lm(folder, field)
    load_s = time.perf_counter() - start
    kv_cache = require_kv_cache(model, folder, field)
    family = architecture(model.config)
    seq = min(128, family.context or 128)
    scoring = token_windows(name, params, root, family.vocab_size, seq)
    if family.context and scoring.inputs["input_ids"].shape[1] > family.context:
        raise ModelFileError(
            f"{config.eval_data}: windows of {scoring.inputs['input_ids'].shape[1]} tokens exceed the model's "
            f"context of {family.context} ({PARAMS_FILE}: catalog.{name}.eval_data)"
        )
    start = time.perf_counter()
    scoring.outputs = reference_outputs(model, scoring.inputs["input_ids"])
    perplexity = float(np.exp(-scoring.outputs["logprob"].mean()))
    report: dict[str, Any] = {
        "status": "ok",
        "reason": "",
        "source": config.source,
        "task": config.task,
        "kv_cache": kv_cache,
        "source_metric": {"metric": "perplexity", "value": perplexity},
        "eval_samples": len(scoring),
        "dims": {"seq": int(scoring.inputs["input_ids"].shape[1])},
        "parameters": sum(p.numel() for p in model.parameters()),
        "source_load_s": load_s,
        "reference_s": time.perf_counter() - start,
    }
    with atomic_dir(layout.source_dir(name, root)) as tmp:
        (tmp / layout.HF_DIR).mkdir()
        for pattern in COPIED:
            for file in folder.glob(pattern):
                shutil.copy2(file, tmp / layout.HF_DIR / file.name)
        scoring.save(tmp / layout.REFERENCE)
        source_record.write(
            SourceRecord(
                model=name,
                status="ok",
                task=config.task,
                config=config,
                inputs={"input_ids": InputSpec(shape=["batch", "seq"], dtype="int64", kind="token_ids")},
                output_names=["logits"],
                dims=report["dims"],
                vocab_size=family.vocab_size,
                model_digest=tree_digest(model_dir(name, root)),  # its files, or the factory's code
                eval_origin=scoring.origin,
                held_out={"scoring": HeldOut(rows=len(scoring), origin=scoring.origin)},
                family=family,
                export={k: v for k, v in report.items() if k not in ("source_load_s", "reference_s")},
            ),
            tmp,
        )
    write_json(layout.export_report(name, root), report)
    return report
