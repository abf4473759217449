"""A Wan2.1-1.3B-shaped model (30 blocks, dim 1536, ffn 8960) at 16 tokens:
capture finishes, and blocks of one structure get identical op lists. The
time it takes is printed (docs/measurements.md quotes it); it is not asserted."""

from __future__ import annotations

import pathlib
import time

import torch

import sacplan_torch

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


def test_capturing_30_wan_blocks_gives_identical_op_lists():
    setup = sacplan_torch.load_setup(f"{EXAMPLES / 'wan_block'}.py:setup",
                                     size="1.3b-shape", dtype=torch.float32)
    start = time.perf_counter()
    profile = sacplan_torch.capture(setup.model, setup.step, blocks=setup.blocks,
                                    name=setup.name, warmup=0, repeats=1)
    elapsed = time.perf_counter() - start
    print(f"\ncaptured 30 Wan2.1-1.3B-shaped blocks in {elapsed:.1f} s")
    blocks = profile["blocks"]
    assert len(blocks) == 30

    def structure(block):
        return [(op["id"], op["kind"], op["inputs"], [o["bytes"] for o in op["outputs"]],
                 op["backward_needs"], op["param_bytes"]) for op in block["ops"]]

    first = structure(blocks[0])
    assert len(first) > 20
    assert all(structure(block) == first for block in blocks[1:])
    params = sum(p.numel() for p in setup.model.parameters())
    assert 1.2e9 < params < 1.6e9
    assert profile["fixed"]["param_bytes"] == params * 4
