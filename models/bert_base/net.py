"""BERT-base's shape (12 layers, hidden 768, 12 heads, intermediate 3072, 30,522-token vocabulary:
109 M parameters) as a sentence encoder with seeded weights: the encoder size most production text
models have, to see which variants hold at real scale. Nothing downloaded."""

from __future__ import annotations

import torch
from torch import nn
from transformers import BertConfig, BertModel


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


def build() -> SentenceEncoder:
    config = BertConfig(
        hidden_size=768,
        num_hidden_layers=12,
        num_attention_heads=12,
        intermediate_size=3072,
        attn_implementation="eager",  # plain MatMul/Softmax attention: what ONNX exporters and optimizers expect
    )
    return SentenceEncoder(config)
