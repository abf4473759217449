"""Double-stream blocks (Flux, SD3, HunyuanVideo): a block takes `(img, txt)`
plus shared conditioning and returns `(img, txt)`; both streams change in
every block, so both are carried and counted per block.

The block (unseen_blocks.DoubleStreamBlock) follows the public description
of FLUX's `DoubleStreamBlock`; fp32 on CPU here (test_unseen_blocks.py runs
it under bf16 autocast).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import sacplan_torch
from sacplan_cli import plan, simulate
from sacplan_torch import SacplanError
from unseen_blocks import DoubleStreamDiT

SIZES = {
    "small": dict(dim=32, heads=2, mlp=128, img_tokens=192, txt_tokens=64, layers=3),
    "large": dict(dim=64, heads=4, mlp=256, img_tokens=384, txt_tokens=128, layers=4),
}
TOLERANCE = 0.02


def make(size: str):
    cfg = SIZES[size]
    torch.manual_seed(0)
    model = DoubleStreamDiT(**cfg)
    gen = torch.Generator().manual_seed(1)
    latents = torch.randn(1, cfg["img_tokens"], 16, generator=gen)
    text = torch.randn(1, cfg["txt_tokens"], 48, generator=gen)
    t = torch.randn(1, 8, generator=gen)
    target = torch.randn(1, cfg["img_tokens"], 16, generator=gen)

    def step(m):
        img, txt = m(latents, text, t)
        return F.mse_loss(img, target) + txt.square().mean()

    return model, step


def optimizer(model):
    return torch.optim.AdamW(model.parameters(), lr=1e-3)


def grads(model, step):
    model.zero_grad(set_to_none=True)
    step(model).backward()
    return {name: p.grad.clone() for name, p in model.named_parameters()}


def test_text_stream_is_carried_in_every_block():
    model, step = make("small")
    profile = sacplan_torch.capture(model, step, blocks="blocks", optimizer=optimizer(model),
                                    warmup=0, repeats=1)
    for block in profile["blocks"]:
        kinds = {inp["id"]: inp["kind"] for inp in block["inputs"]}
        assert kinds == {"img": "carried", "txt": "carried", "vec": "shared",
                         "pe": "shared"}, block["index"]
        assert len(block["outputs"]) == 2 and "output" not in block
    text_bytes = 4 * 64 * 32
    assert [inp["bytes"] for inp in profile["blocks"][1]["inputs"]
            if inp["id"] == "txt"] == [text_bytes]
    assert [s["arg"] for s in profile["model"]["config"]["streams"]] == ["img", "txt"]


def test_unmatched_streams_raise_one_error():
    model, _ = make("small")
    latents, text, t = torch.randn(1, 192, 16), torch.randn(1, 64, 48), torch.randn(1, 8)

    def drops_txt(m):
        img, txt = m.img_in(latents), m.txt_in(text)
        vec = m.time_in(t)
        pe = torch.stack((m.angle.cos(), m.angle.sin()))
        for block in m.blocks:
            img, _ = block(img, txt, vec, pe=pe)   # txt made once, outside
        return img.square().mean()

    with pytest.raises(SacplanError, match=r"blocks\[0\] \(blocks.0\) returns 2 tensors but "
                                           r"blocks\[1\] \(blocks.1\) receives 1 of them"):
        sacplan_torch.capture(model, drops_txt, blocks="blocks", warmup=0, repeats=1)


@pytest.mark.parametrize("size", SIZES)
def test_measured_peak_matches_prediction(size, tmp_path):
    model, step = make(size)
    profile_path = str(tmp_path / "profile.json")
    sacplan_torch.capture(model, step, blocks="blocks", optimizer=optimizer(model),
                          name="double-stream", path=profile_path, warmup=1, repeats=1)
    plans = {name: plan(profile_path, str(tmp_path / f"{name}.json"), preset=name)
             for name in ("none", "full")}
    low = plans["full"]["predicted"]["peak_bytes"]
    high = plans["none"]["predicted"]["peak_bytes"]
    budget = (low + high) // 2
    plans["optimal"] = plan(profile_path, str(tmp_path / "optimal.json"), budget=budget)
    assert plans["optimal"]["predicted"]["peak_bytes"] <= budget

    reference, ref_step = make(size)
    expected = grads(reference, ref_step)
    rows = {}
    for label, document in plans.items():
        predicted = simulate(profile_path, str(tmp_path / f"{label}.json"))["peak_bytes"]
        fresh, fresh_step = make(size)
        sacplan_torch.apply_plan(fresh, document, blocks="blocks", model_name="double-stream")
        got = grads(fresh, fresh_step)
        for name, grad in expected.items():
            torch.testing.assert_close(got[name], grad, rtol=1e-5, atol=1e-5, msg=name)
        fresh.zero_grad(set_to_none=True)
        measured = sacplan_torch.measure_peak(fresh, fresh_step, optimizer=optimizer(fresh),
                                              steps=1, timed=False).peak_bytes
        rows[label] = (predicted, measured)
    table = "\n".join(f"  {label:8s} predicted {p:>11,d}  measured {m:>11,d}  "
                      f"{100 * (p - m) / m:+.2f}%" for label, (p, m) in rows.items())
    print(f"\ndouble-stream {size}:\n{table}")
    for label, (predicted, measured) in rows.items():
        assert abs(predicted - measured) <= TOLERANCE * measured, f"{label}\n{table}"
    assert rows["none"][1] > 1.2 * rows["full"][1], table
