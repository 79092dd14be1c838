"""A Llama-style decoder of 0.27 B parameters with seeded weights (nothing downloaded, nothing
trained): large enough that decoding is bound by reading the weights, where weight-only INT4 shows
its speed-up. Its tokenizer is tiny_lm's scheme at a 32k vocabulary, trained on the same text.
"""

from __future__ import annotations

from transformers import LlamaConfig, LlamaForCausalLM


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


def build(**kwargs: int) -> LlamaForCausalLM:
    return LlamaForCausalLM(config(**kwargs))
