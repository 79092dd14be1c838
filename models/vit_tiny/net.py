"""A small vision transformer built with Hugging Face `transformers` from a config (seeded weights,
nothing downloaded): 32x32 RGB images cut into 8x8 patches, 4 layers, hidden 128, 4 heads, ten
class scores. The shape of the ViTs users bring, at a size that runs on 2 cores in seconds;
accuracy is fidelity to its own FP32 output.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import ViTConfig, ViTForImageClassification


class ImageClassifier(nn.Module):
    def __init__(self, config: ViTConfig) -> None:
        super().__init__()
        self.config = config  # num_attention_heads: exported for ORT's attention fusion
        self.vit = ViTForImageClassification(config)

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        return self.vit(pixel_values=pixel_values).logits


def build(image: int = 32, patch: int = 8, hidden: int = 128, layers: int = 4, heads: int = 4) -> ImageClassifier:
    config = ViTConfig(
        image_size=image,
        patch_size=patch,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=4 * hidden,
        num_labels=10,
        attn_implementation="eager",  # plain MatMul/Softmax attention, as ONNX exporters expect
    )
    return ImageClassifier(config).eval()
