"""A small Llama-style causal language model built with Hugging Face `transformers` from a config,
with a byte-level BPE tokenizer trained here (models.common.text): the shape of the decoders users
bring (rotary positions, grouped-query attention, SwiGLU, an untied LM head), small enough to
train on 2 cores in about two minutes. Nothing is downloaded.
"""

from __future__ import annotations

from transformers import LlamaConfig, LlamaForCausalLM


def config(
    vocab_size: int = 2048, hidden: int = 192, layers: int = 4, heads: int = 6, kv_heads: int = 2, context: int = 256
) -> LlamaConfig:
    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=hidden * 8 // 3 // 32 * 32,
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
