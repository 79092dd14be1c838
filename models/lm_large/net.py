"""A Llama-style decoder of 0.25 B parameters with seeded weights (nothing downloaded, nothing
trained): large enough that decoding is bound by reading the weights, where weight-only INT4 shows
its speed-up. Its tokenizer is tiny_lm's scheme (models.common.text) at a 32k vocabulary, trained
on the same text; with seeded weights, perplexity is near the vocabulary size for every variant and
its increase says whether quantization kept the model's function, not how well it writes.
"""

from __future__ import annotations

from typing import Any

from transformers import LlamaConfig, LlamaForCausalLM

from models.common.text import corpus, train_tokenizer


def config(
    vocab_size: int = 32000, hidden: int = 1024, layers: int = 16, heads: int = 16, kv_heads: int = 4,
    intermediate: int = 2816, context: int = 1024,
) -> LlamaConfig:  # fmt: skip
    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=context,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
        tie_word_embeddings=False,
    )


def build(vocab_size: int = 32000, **kwargs: int) -> tuple[LlamaForCausalLM, Any]:
    """The seeded model (the export seeds torch with catalog.lm_large.init_seed) and its tokenizer."""
    train_text, _ = corpus(seed=0, held_out=0.1)
    tokenizer = train_tokenizer(train_text.split("\n\n"), vocab_size)
    return LlamaForCausalLM(config(vocab_size=vocab_size, **kwargs)), tokenizer
