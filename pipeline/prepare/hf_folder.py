"""Hugging Face folders (config.json, weights, tokenizer) of encoders and classifiers as PyTorch models.

`build` is the catalog `factory` that `python -m pipeline add` writes for such a folder: it loads the
model class the task calls for (transformers' Auto classes, eager attention: the graph ORT's and
OpenVINO's transformer passes recognise) and wraps it so that it takes the catalog's inputs in order
and returns plain tensors: a feature extractor its mean-pooled embedding (sentence-transformers'
pooling; `pooling: cls` the first token's state, `none` every token's), a classifier its logits.
The export is torch.onnx's, from the loaded model (optimum-onnx, the maintained exporter, requires
transformers < 4.58 and cannot be installed beside optimum-intel 2.2: issue 32).

A classifier folder whose weights hold no head is refused: transformers initialises a missing head at
random and only logs it, which would measure noise as a model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch import nn

from pipeline.core.errors import ModelFileError

TASKS = ("feature-extraction", "text-classification", "token-classification", "image-classification")
TEXT_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def task_of(config: dict[str, Any]) -> str | None:
    """The task a folder's config.json names through its `architectures`, or None."""
    for architecture in config.get("architectures") or []:
        if architecture.endswith("ForSequenceClassification"):
            return "text-classification"
        if architecture.endswith("ForTokenClassification"):
            return "token-classification"
        if architecture.endswith("ForImageClassification"):
            return "image-classification"
        if architecture.endswith(("ForCausalLM", "LMHeadModel")):
            return "text-generation"
        if architecture.endswith("Model"):
            return "feature-extraction"
    return None


def read_config(folder: Path) -> dict[str, Any]:
    try:
        return json.loads((folder / "config.json").read_text())
    except (OSError, ValueError) as error:
        raise ModelFileError(f"{folder / 'config.json'}: not a readable Hugging Face config ({error})") from None


def text_inputs(config: dict[str, Any]) -> list[str]:
    """The token inputs the model takes: token_type_ids only where it has segments (BERT: 2)."""
    return [*TEXT_INPUTS[:2], *(["token_type_ids"] if int(config.get("type_vocab_size") or 0) > 1 else [])]


class Wrapped(nn.Module):
    """The loaded model taking the catalog's inputs positionally and returning one tensor."""

    def __init__(self, model: nn.Module, task: str, pooling: str) -> None:
        super().__init__()
        self.model, self.task, self.pooling = model, task, pooling
        self.config = model.config  # vocab_size, num_attention_heads: read by the source and the exporter

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        if self.task == "image-classification":
            return self.model(pixel_values=inputs[0]).logits
        named = dict(zip(TEXT_INPUTS, inputs, strict=False))
        out = self.model(**named)
        if self.task != "feature-extraction":
            return out.logits
        hidden = out.last_hidden_state
        if self.pooling == "none":
            return hidden
        if self.pooling == "cls":
            return hidden[:, 0]
        mask = named["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)


def build(folder: str, task: str, pooling: str = "mean") -> nn.Module:
    """The folder's model for `task` (one of TASKS), wrapped; pretrained weights from the folder."""
    import transformers

    if task not in TASKS:
        raise ValueError(f"task {task!r}: one of {', '.join(TASKS)}")
    if pooling not in ("mean", "cls", "none"):
        raise ValueError(f"pooling {pooling!r}: mean, cls or none")
    auto = {
        "feature-extraction": transformers.AutoModel,
        "text-classification": transformers.AutoModelForSequenceClassification,
        "token-classification": transformers.AutoModelForTokenClassification,
        "image-classification": transformers.AutoModelForImageClassification,
    }[task]
    extra = {"add_pooling_layer": False} if task == "feature-extraction" and _has_pooler_option(folder) else {}
    level, bars = transformers.logging.get_verbosity(), transformers.logging.is_progress_bar_enabled()
    transformers.logging.set_verbosity_error()  # its load report is read below, not printed
    transformers.logging.disable_progress_bar()
    try:
        model, info = auto.from_pretrained(folder, attn_implementation="eager", output_loading_info=True, **extra)
    finally:
        transformers.logging.set_verbosity(level)
        if bars:
            transformers.logging.enable_progress_bar()
    if task != "feature-extraction" and (head := [k for k in info.get("missing_keys", []) if _is_head(k)]):
        raise ModelFileError(
            f"{folder}: its weights have no {task} head ({', '.join(sorted(head)[:3])} missing): transformers would "
            "initialise it at random; add it with --task feature-extraction, or bring the fine-tuned folder"
        )
    return Wrapped(model.eval(), task, pooling)


def _is_head(key: str) -> bool:
    return key.split(".")[0] in {"classifier", "score", "pre_classifier", "head"}


def _has_pooler_option(folder: str) -> bool:
    """Whether the architecture takes `add_pooling_layer` (BERT-like): an unused pooler is left out."""
    return read_config(Path(folder)).get("model_type") in {"bert", "roberta", "xlm-roberta", "electra", "camembert"}
