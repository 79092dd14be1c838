"""No training: the weights are the seeded initialisation. Writes trained/hf/ (the model folder, with
a byte-level BPE tokenizer trained on the standard library's docstrings, as tiny_lm's) and eval.npz
(held-out windows of that text: perplexity is then near the vocabulary size for every variant, and
its increase says whether quantization kept the model's function, not how well it writes).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from models.lm_large.net import build
from models.tiny_lm.net import train_tokenizer
from models.tiny_lm.train import corpus, windows


def train(settings: dict[str, Any], out_dir: Path) -> dict[str, Any]:
    torch.manual_seed(settings["seed"])
    train_text, held_text = corpus(settings["seed"], settings["held_out"])
    tokenizer = train_tokenizer(train_text.split("\n\n"), settings["vocab_size"])
    model = build(vocab_size=settings["vocab_size"]).eval()
    model.save_pretrained(out_dir / "hf")
    tokenizer.save_pretrained(out_dir / "hf")
    held = windows(tokenizer(held_text)["input_ids"], settings["seq"])
    np.savez(out_dir / "eval.npz", input_ids=held)
    return {
        "parameters": sum(p.numel() for p in model.parameters()),
        "held_out_windows": len(held),
        "source": "seeded initialisation; tokenizer and held-out text: Python standard library docstrings",
    }
