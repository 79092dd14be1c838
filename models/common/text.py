"""Text for the zoo's decoders: the docstrings of Python's standard library (text every installation
ships), whole modules on each side of a seeded train / held-out split, and a byte-level BPE tokenizer
trained on the training side with `tokenizers`."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import random
from collections.abc import Iterable

import numpy as np

SKIP = ("test", "idlelib", "tkinter", "turtle", "lib2to3", "ensurepip", "antigravity", "this", "__")
EOS = "<|endoftext|>"


def docstrings(name: str) -> str:
    """A module's docstrings (its own and its members'); empty if it will not import here."""
    try:
        module = importlib.import_module(name)
    except Exception:
        return ""
    docs = [inspect.getdoc(module)] + [inspect.getdoc(m) for _, m in inspect.getmembers(module)]
    return "\n\n".join(dict.fromkeys(d for d in docs if d and len(d) > 40))


def corpus(seed: int, held_out: float) -> tuple[str, str]:
    """(training text, held-out text): whole standard-library modules on each side, seeded."""
    stdlib = inspect.getfile(inspect).rsplit("/", 1)[0]
    names = sorted(
        m.name
        for m in pkgutil.iter_modules()
        if getattr(m.module_finder, "path", "") == stdlib and not m.name.startswith(SKIP)
    )
    random.Random(seed).shuffle(names)
    texts = [t for t in map(docstrings, names) if t]
    cut = int(len(texts) * (1 - held_out))
    return "\n\n".join(texts[:cut]), "\n\n".join(texts[cut:])


def windows(ids: list[int], length: int) -> np.ndarray:
    """Consecutive windows of `length` token ids (the tail that does not fill one is dropped)."""
    count = len(ids) // length
    return np.array(ids[: count * length], dtype=np.int64).reshape(count, length)


def train_tokenizer(texts: Iterable[str], vocab_size: int):  # -> transformers.PreTrainedTokenizerFast
    """Byte-level BPE (GPT-2's scheme): any text encodes, the end-of-text token is id 0."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=[EOS], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tokenizer.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token=EOS, bos_token=EOS, pad_token=EOS)
