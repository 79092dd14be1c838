"""Train the zoo decoder on the docstrings of Python's standard library (text every installation
ships): the modules are split, seeded, into training and held-out text, so perplexity on the
held-out windows says how well the model predicts text it never saw. Writes trained/hf/ (a
Hugging Face model folder: config, safetensors weights, tokenizer, what a user brings) and
eval.npz (held-out windows of token ids: the rows every variant's quality is scored on).
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from models.common.text import corpus, train_tokenizer, windows
from models.tiny_lm.net import build


def train(settings: dict[str, Any], out_dir: Path) -> dict[str, Any]:
    torch.manual_seed(settings["seed"])
    train_text, held_text = corpus(settings["seed"], settings["held_out"])
    tokenizer = train_tokenizer(train_text.split("\n\n"), settings["vocab_size"])
    rows = windows(tokenizer(train_text)["input_ids"], settings["seq"] + 1)
    held = windows(tokenizer(held_text)["input_ids"], settings["seq"])
    model = build(vocab_size=settings["vocab_size"], layers=settings["layers"], hidden=settings["hidden"])
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings["lr"], weight_decay=0.01)
    steps, batch = settings["steps"], settings["batch_size"]
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, settings["lr"], total_steps=steps, pct_start=0.1)
    generator = np.random.default_rng(settings["seed"])
    start = time.perf_counter()
    model.train()
    for _ in range(steps):
        x = torch.from_numpy(rows[generator.integers(0, len(rows), batch)])
        loss = model(input_ids=x[:, :-1], labels=x[:, :-1]).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
    model.eval()
    with torch.no_grad():
        held_loss = float(np.mean([model(input_ids=torch.from_numpy(w[None]), labels=torch.from_numpy(w[None])).loss
                                   for w in held[:64]]))  # fmt: skip
    model.save_pretrained(out_dir / "hf")
    tokenizer.save_pretrained(out_dir / "hf")
    np.savez(out_dir / "eval.npz", input_ids=held)
    return {
        "parameters": sum(p.numel() for p in model.parameters()),
        "train_tokens": int(rows.size),
        "held_out_windows": len(held),
        "final_train_loss": loss.item(),
        "held_out_perplexity": math.exp(held_loss),
        "train_s": round(time.perf_counter() - start, 1),
        "source": "Python standard library docstrings (modules split train / held out)",
    }
