"""Models from the libraries people train with, built from small configs
with random weights: diffusers' Wan, Flux, HunyuanVideo and CogVideoX
transformers, transformers' Llama, Qwen3-MoE and Mixtral. Each `build`
returns a sacplan_torch.Setup whose step runs a fixed batch through the
model in float32 or under bf16 autocast (float32 parameters, as trainers
keep their master weights), on the CPU."""

from __future__ import annotations

import contextlib
from typing import Callable, Dict

import torch

import sacplan_torch

DTYPES = {"fp32": None, "bf16": torch.bfloat16}


def _autocast(dtype):
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast("cpu", dtype=dtype)


def _setup(model, forward: Callable, blocks, name: str, dtype) -> sacplan_torch.Setup:
    def step(m):
        with _autocast(dtype):
            out = forward(m)
        return out.float().square().mean()

    return sacplan_torch.Setup(
        model=model, step=step, blocks=blocks, name=name,
        make_optimizer=lambda m: torch.optim.AdamW(m.parameters(), lr=1e-3))


def _batch(seed: int, *shapes):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=g) for shape in shapes]


def wan(dtype):
    from diffusers import WanTransformer3DModel
    model = WanTransformer3DModel(
        patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=16, in_channels=4,
        out_channels=4, text_dim=24, freq_dim=32, ffn_dim=64, num_layers=3,
        rope_max_seq_len=64)
    x, text = _batch(1, (1, 4, 3, 8, 8), (1, 8, 24))
    t = torch.tensor([500])
    forward = lambda m: m(hidden_states=x, timestep=t, encoder_hidden_states=text,
                          return_dict=False)[0]
    return _setup(model, forward, "blocks", "diffusers-wan", dtype)


def flux(dtype):
    from diffusers import FluxTransformer2DModel
    model = FluxTransformer2DModel(
        patch_size=1, in_channels=8, num_layers=2, num_single_layers=2, attention_head_dim=16,
        num_attention_heads=2, joint_attention_dim=24, pooled_projection_dim=16,
        guidance_embeds=False, axes_dims_rope=(4, 6, 6))
    tokens, text = 64, 12
    x, enc, pooled = _batch(2, (1, tokens, 8), (1, text, 24), (1, 16))
    img_ids = torch.zeros(tokens, 3)
    img_ids[:, 1], img_ids[:, 2] = torch.arange(tokens) // 8, torch.arange(tokens) % 8
    txt_ids, t = torch.zeros(text, 3), torch.tensor([0.5])
    forward = lambda m: m(hidden_states=x, encoder_hidden_states=enc, pooled_projections=pooled,
                          timestep=t, img_ids=img_ids, txt_ids=txt_ids, return_dict=False)[0]
    return _setup(model, forward, ["transformer_blocks", "single_transformer_blocks"],
                  "diffusers-flux", dtype)


def hunyuan_video(dtype):
    from diffusers import HunyuanVideoTransformer3DModel
    model = HunyuanVideoTransformer3DModel(
        in_channels=4, out_channels=4, num_attention_heads=2, attention_head_dim=16,
        num_layers=2, num_single_layers=2, num_refiner_layers=1, mlp_ratio=2.0, patch_size=2,
        patch_size_t=1, qk_norm="rms_norm", guidance_embeds=True, text_embed_dim=24,
        pooled_projection_dim=16, rope_axes_dim=(4, 6, 6))
    x, enc, pooled = _batch(3, (1, 4, 3, 8, 8), (1, 8, 24), (1, 16))
    mask = torch.ones(1, 8, dtype=torch.bool)
    mask[:, 6:] = False
    t, guidance = torch.tensor([500]), torch.tensor([3500.0])
    forward = lambda m: m(hidden_states=x, timestep=t, encoder_hidden_states=enc,
                          encoder_attention_mask=mask, pooled_projections=pooled,
                          guidance=guidance, return_dict=False)[0]
    return _setup(model, forward, ["transformer_blocks", "single_transformer_blocks"],
                  "diffusers-hunyuanvideo", dtype)


def cogvideox(dtype):
    from diffusers import CogVideoXTransformer3DModel
    model = CogVideoXTransformer3DModel(
        num_attention_heads=2, attention_head_dim=16, in_channels=4, out_channels=4,
        time_embed_dim=32, text_embed_dim=24, num_layers=3, sample_width=8, sample_height=8,
        sample_frames=5, patch_size=2, max_text_seq_length=8)
    x, enc = _batch(4, (1, 2, 4, 8, 8), (1, 8, 24))
    t = torch.tensor([500])
    forward = lambda m: m(hidden_states=x, encoder_hidden_states=enc, timestep=t,
                          return_dict=False)[0]
    return _setup(model, forward, "transformer_blocks", "diffusers-cogvideox", dtype)


def _causal_lm(model, name: str, dtype):
    ids = torch.randint(0, model.config.vocab_size, (2, 48),
                        generator=torch.Generator().manual_seed(5))
    # Training runs without the KV cache (transformers turns it off under
    # gradient checkpointing): a cache holds every layer's keys and values
    # for the whole step, and a checkpoint's re-run appends to it again.
    forward = lambda m: m(input_ids=ids, use_cache=False).logits
    return _setup(model, forward, "model.layers", name, dtype)


def llama(dtype):
    from transformers import LlamaConfig, LlamaForCausalLM
    config = LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128,
                         num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=128, attn_implementation="sdpa")
    return _causal_lm(LlamaForCausalLM(config), "transformers-llama", dtype)


def qwen3_moe(dtype):
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM
    config = Qwen3MoeConfig(vocab_size=128, hidden_size=64, intermediate_size=128,
                            moe_intermediate_size=32, num_hidden_layers=3,
                            num_attention_heads=4, num_key_value_heads=2, num_experts=4,
                            num_experts_per_tok=2, max_position_embeddings=128,
                            head_dim=16, attn_implementation="sdpa")
    return _causal_lm(Qwen3MoeForCausalLM(config), "transformers-qwen3-moe", dtype)


def mixtral(dtype):
    from transformers import MixtralConfig, MixtralForCausalLM
    config = MixtralConfig(vocab_size=128, hidden_size=64, intermediate_size=96,
                           num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
                           num_local_experts=4, num_experts_per_tok=2,
                           max_position_embeddings=128, attn_implementation="sdpa")
    return _causal_lm(MixtralForCausalLM(config), "transformers-mixtral", dtype)


MODELS: Dict[str, Callable] = {
    "wan": wan, "flux": flux, "hunyuan_video": hunyuan_video, "cogvideox": cogvideox,
    "llama": llama, "qwen3_moe": qwen3_moe, "mixtral": mixtral,
}


def build(name: str, dtype_name: str) -> sacplan_torch.Setup:
    """A fresh model (seeded: the same weights every call) and its step."""
    torch.manual_seed(0)
    return MODELS[name](DTYPES[dtype_name])
