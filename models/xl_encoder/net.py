"""A text encoder over 2 GB (seeded weights, nothing downloaded): XLM-R's 250,002-token
multilingual vocabulary at hidden 2048, two layers, 16 heads, intermediate 8192: 614 M parameters,
2.45 GB in FP32, most of it the embedding table, as in multilingual encoders and recommenders.

Over protobuf's 2 GB limit an ONNX file must keep its weights in a side file ("external data"):
this model is there to take every path that writes, copies, quantizes, compiles and serves such
a file. Two layers keep a call near 40 ms on 2 cores, so a full run fits in minutes."""

from __future__ import annotations

import torch
from torch import nn
from transformers import BertConfig, BertModel


class ClsEncoder(nn.Module):
    """The first token's last hidden state (BERT's [CLS] pooling, as classifiers and rankers read it)."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.config = config  # exposes vocab_size: generated token ids stay inside the vocabulary
        self.bert = BertModel(config, add_pooling_layer=False)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state[:, 0]


def build() -> ClsEncoder:
    config = BertConfig(
        vocab_size=250_002,
        hidden_size=2048,
        num_hidden_layers=2,
        num_attention_heads=16,
        intermediate_size=8192,
        max_position_embeddings=514,
        attn_implementation="eager",  # plain MatMul/Softmax attention: what ONNX exporters and optimizers expect
    )
    return ClsEncoder(config)
