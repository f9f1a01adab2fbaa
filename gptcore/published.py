"""Real LLaMA-family models as GPTConfigs: each configuration copied from its config.json on the Hugging Face hub,
with the parameter count of its published weights.

The concept pages set these beside the tutorial's model, so a convention they teach (grouped-query attention, RoPE's
θ, SwiGLU's 8/3·d_model, tied embeddings) comes with a real model's own number. `context` is the published
max_position_embeddings: the longest text the model was made for (an imported copy keeps at most
gptcore.hub.DEFAULT_MAX_CONTEXT of it by default).

GPT-2 is not here: its Linear layers and LayerNorms carry biases, which GPTConfig cannot express.
"""
from __future__ import annotations

from dataclasses import dataclass

from .config import GPTConfig


@dataclass(frozen=True)
class PublishedModel:
    name: str
    repo: str  # the Hugging Face repository whose config.json these numbers are
    config: GPTConfig
    params: int  # weights in the published checkpoint, a tied embedding counted once

    @property
    def source(self) -> str:
        return f"https://huggingface.co/{self.repo}/blob/main/config.json"


SMOLLM2_135M = PublishedModel("SmolLM2-135M", "HuggingFaceTB/SmolLM2-135M", GPTConfig(
    vocab_size=49152, d_model=576, n_layer=30, n_head=9, n_kv_head=3, d_ff=1536, context=8192, norm_eps=1e-5,
    rope_theta=100_000.0, tie_embeddings=True), params=134_515_008)

QWEN3_0_6B = PublishedModel("Qwen3-0.6B", "Qwen/Qwen3-0.6B", GPTConfig(
    vocab_size=151_936, d_model=1024, n_layer=28, n_head=16, n_kv_head=8, head_dim=128, d_ff=3072, context=40_960,
    norm_eps=1e-6, rope_theta=1_000_000.0, qk_norm=True, tie_embeddings=True), params=596_049_920)

LLAMA_3_2_1B = PublishedModel("Llama-3.2-1B", "meta-llama/Llama-3.2-1B", GPTConfig(
    vocab_size=128_256, d_model=2048, n_layer=16, n_head=32, n_kv_head=8, head_dim=64, d_ff=8192, context=131_072,
    norm_eps=1e-5, rope_theta=500_000.0, rope_scaling="llama3", rope_factor=32.0, rope_low_freq_factor=1.0,
    rope_high_freq_factor=4.0, rope_original_context=8192, tie_embeddings=True), params=1_235_814_400)

TINYLLAMA_1_1B = PublishedModel("TinyLlama-1.1B", "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T", GPTConfig(
    vocab_size=32_000, d_model=2048, n_layer=22, n_head=32, n_kv_head=4, d_ff=5632, context=2048, norm_eps=1e-5,
    rope_theta=10_000.0), params=1_100_048_384)

PUBLISHED = {m.name: m for m in (SMOLLM2_135M, QWEN3_0_6B, LLAMA_3_2_1B, TINYLLAMA_1_1B)}
