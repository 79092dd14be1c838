"""A BERT-style sentence encoder built with Hugging Face `transformers` from a config: the shape of
the models users bring (int64 `input_ids` and `attention_mask`, `[batch, seq]` with a dynamic
sequence axis), with nothing downloaded. The defaults are the architecture of
sentence-transformers/all-MiniLM-L6-v2 (6 layers, hidden 384, 12 heads, intermediate 1536, BERT's
30,522-token vocabulary: 22.7 M parameters); weights are the seeded initialisation, so accuracy is
fidelity to the FP32 model.

The output is the attention-masked mean of the last hidden states: a sentence embedding, as
sentence-transformers computes it.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import BertConfig, BertModel


class SentenceEncoder(nn.Module):
    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.config = config  # exposes vocab_size: generated token ids stay inside the vocabulary
        self.bert = BertModel(config, add_pooling_layer=False)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)


def build(
    vocab_size: int = 30522, hidden: int = 384, layers: int = 6, heads: int = 12, intermediate: int = 1536
) -> SentenceEncoder:
    config = BertConfig(
        vocab_size=vocab_size,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=intermediate,
        attn_implementation="eager",  # plain MatMul/Softmax attention: what ONNX exporters and optimizers expect
    )
    return SentenceEncoder(config)
