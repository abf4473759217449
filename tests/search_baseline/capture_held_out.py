"""Captures the held-out profile of tests/data/search_baseline: diffusers'
WanTransformer3DModel (5 blocks, 110 aten ops each, bf16 autocast, AdamW)
on the CPU. The search's tuning constants were chosen on the captures in
bench/data (python/examples' own Wan and FLUX blocks); this one is diffusers'
code, which the search never saw.

The CPU has no host link, so one is given: 50 GB/s each way (an H100's
PCIe Gen5 copy engines) and per-copy host costs small against these
blocks' op times (tens of microseconds each on this CPU): at 2 us per
tensor each way offload pays for some tensors and not others, which is what
exercises the search (at 3 us to send one, none pays; at 0, most do).
Times are measured, so a new capture differs from the stored one: the
baseline (search_baseline.py record) must be recorded again with it.

Usage (from the repository root, with sacplan_torch importable):
  OMP_NUM_THREADS=1 python3 tests/search_baseline/capture_held_out.py OUT.json
"""

from __future__ import annotations

import json
import sys

import torch
from diffusers import WanTransformer3DModel

import sacplan_torch

HOST_LINK = {"d2h_gbps": 50.0, "h2d_gbps": 50.0, "host_memory_bytes": 256_000_000_000,
             "offload_host_us": 2.0, "fetch_host_us": 2.0, "copy_setup_us": 1.0}


def main(out: str) -> None:
    torch.manual_seed(0)
    model = WanTransformer3DModel(
        patch_size=(1, 2, 2), num_attention_heads=4, attention_head_dim=32, in_channels=4,
        out_channels=4, text_dim=32, freq_dim=32, ffn_dim=256, num_layers=5,
        rope_max_seq_len=64)
    generator = torch.Generator().manual_seed(1)
    latents = torch.randn(1, 4, 5, 16, 16, generator=generator)
    text = torch.randn(1, 16, 32, generator=generator)
    timestep = torch.tensor([500])

    def step(m):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = m(hidden_states=latents, timestep=timestep, encoder_hidden_states=text,
                    return_dict=False)[0]
        return out.float().square().mean()

    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    profile = sacplan_torch.capture(model, step, blocks="blocks", optimizer=optimizer,
                                    name="held-out-diffusers-wan", repeats=3,
                                    host_link=HOST_LINK)
    # Compact: the fixture stays small; floats keep their exact values.
    with open(out, "w", encoding="utf-8") as f:
        json.dump(profile, f, separators=(",", ":"), sort_keys=True)
        f.write("\n")
    print(f"wrote {out}: {len(profile['blocks'])} blocks, "
          f"{[len(b['ops']) for b in profile['blocks']]} ops")


if __name__ == "__main__":
    main(sys.argv[1])
