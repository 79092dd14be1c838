"""No training: the weights are pretrained. This stage writes the model's real-text data, English
sentences from the docstrings of Python's standard library (text every installation ships),
tokenized by the model's own tokenizer: eval.npz (input_ids, attention_mask; no labels). The
pipeline's hold-out splits it into calibration, validation and scoring rows.
"""

from __future__ import annotations

import importlib
import inspect
import random
import re
from pathlib import Path
from typing import Any

import numpy as np

from models.minilm_l6_pretrained.net import files

MODULES = [
    "argparse", "asyncio", "collections", "concurrent.futures", "contextlib", "csv", "dataclasses", "datetime",
    "decimal", "email", "functools", "http.client", "inspect", "io", "itertools", "json", "logging", "os",
    "pathlib", "pickle", "random", "re", "shutil", "socket", "sqlite3", "statistics", "string", "subprocess",
    "tarfile", "tempfile", "textwrap", "threading", "typing", "unittest", "urllib.parse", "uuid", "zipfile",
]  # fmt: skip
SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


def sentences(modules: list[str] = MODULES) -> list[str]:
    """Every distinct docstring sentence of 6 to 60 words in `modules` and their members, sorted."""
    found: set[str] = set()
    for name in modules:
        module = importlib.import_module(name)
        docs = [inspect.getdoc(module)] + [inspect.getdoc(member) for _, member in inspect.getmembers(module)]
        for doc in filter(None, docs):
            for paragraph in doc.split("\n\n"):
                for sentence in SENTENCE.split(" ".join(paragraph.split())):
                    if 6 <= len(sentence.split()) <= 60 and sentence[0].isalpha() and ">>>" not in sentence:
                        found.add(sentence)
    return sorted(found)


def train(settings: dict[str, Any], out_dir: Path) -> dict[str, Any]:
    from tokenizers import Tokenizer

    text = sentences()
    random.Random(settings["seed"]).shuffle(text)
    text = text[: settings["samples"]]
    tokenizer = Tokenizer.from_file(str(files() / "tokenizer.json"))
    tokenizer.enable_truncation(settings["seq"])
    tokenizer.enable_padding(length=settings["seq"])
    encoded = tokenizer.encode_batch(text)
    ids = np.array([e.ids for e in encoded], dtype=np.int64)
    mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
    np.savez(out_dir / "eval.npz", input_ids=ids, attention_mask=mask)
    (out_dir / "sentences.txt").write_text("\n".join(text) + "\n")
    return {"samples": len(text), "seq": settings["seq"], "mean_tokens": float(mask.sum(1).mean()),
            "truncated": int((mask[:, -1] == 1).sum()), "source": "Python standard library docstrings"}  # fmt: skip
