"""Text in, for the Hugging Face text models `add` brings (encoders and classifiers): the deployment
carries the folder's tokenizer and label names, and `predict --text` tokenizes with it as the eval rows
were tokenized (the folder's own pad id and special tokens), then names each row's label (a text
classifier) or each token's (a token classifier)."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.core.data import Arrays
from pipeline.core.errors import ModelFileError
from pipeline.core.records.manifest import TextFacts

HF_FOLDER_FACTORY = "pipeline.prepare.hf_folder:build"  # the factory `add` writes for a Hugging Face folder
TOKENIZER = "tokenizer"  # the deployment's copy of the folder, weights left out


@cache
def _tokenizer(folder: Path) -> Any:
    """The deployment's tokenizer, loaded once per process (tokenizing and naming tokens share it)."""
    from transformers import AutoTokenizer

    if not (folder / TOKENIZER).is_dir():
        raise ModelFileError(f"{folder}: --text needs a Hugging Face text model added with `add` (no {TOKENIZER}/)")
    return AutoTokenizer.from_pretrained(folder / TOKENIZER)


def tokenize(folder: Path, texts: list[str], names: list[str]) -> Arrays:
    """The model's token inputs for `texts`, padded to the longest and truncated to the tokenizer's limit."""
    tokenizer = _tokenizer(folder)
    if not texts or not all(t.strip() for t in texts):
        raise ModelFileError("--text: empty: give the text to run")
    encoded = tokenizer(texts, padding=True, truncation=True, return_tensors="np")
    return {name: encoded[name].astype(np.int64) for name in names}


def labelled(outputs: Arrays, text: TextFacts) -> list[tuple[str, float]]:
    """Each row's label name and probability (softmax of the logits): a sequence classifier's answer."""
    logits = next(iter(outputs.values())).astype(np.float64)
    probabilities = np.exp(logits - logits.max(axis=-1, keepdims=True))
    probabilities /= probabilities.sum(axis=-1, keepdims=True)
    best = probabilities.argmax(axis=-1)
    return [(label_name(text, i), float(p[i])) for i, p in zip(best, probabilities, strict=True)]


def label_name(text: TextFacts, index: Any) -> str:
    """config.json's id2label name of class `index`, else the index itself."""
    return (text.labels or {}).get(str(int(index)), str(int(index)))


def token_labelled(folder: Path, input_ids: np.ndarray, outputs: Arrays, text: TextFacts) -> list[str]:
    """Each row's tokens with their label names (`token/LABEL`, the argmax of each token's logits),
    special and padding tokens left out: a token classifier's answer, on the ids it was given."""
    tokenizer = _tokenizer(folder)
    special = set(tokenizer.all_special_ids)
    best = next(iter(outputs.values())).argmax(axis=-1)
    return [
        " ".join(
            f"{token}/{label_name(text, label)}"
            for token, i, label in zip(tokenizer.convert_ids_to_tokens(ids.tolist()), ids, row, strict=True)
            if int(i) not in special
        )
        for ids, row in zip(input_ids, best, strict=True)
    ]
