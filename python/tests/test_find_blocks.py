"""find_blocks takes the block specs users pass (issue 41, item 6): a
module path, a container module, a list of modules, several containers or
paths in execution order, a predicate; one block module alone is refused
with the fix, and a path the model lacks names the nearest ones it has.

The models are a transformers LlamaForCausalLM (hidden 64, 2 layers, 2
heads, vocab 128: its blocks are `model.model.layers`) and a diffusers
FluxTransformer2DModel (2 double-stream `transformer_blocks`, then 2
`single_transformer_blocks`), both from tiny configs; nothing runs.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import sacplan_torch
from sacplan_torch import SacplanError, find_blocks

transformers = pytest.importorskip("transformers")
diffusers = pytest.importorskip("diffusers")

LLAMA_LAYERS = ["model.layers.0", "model.layers.1"]
FLUX_BLOCKS = ["transformer_blocks.0", "transformer_blocks.1",
               "single_transformer_blocks.0", "single_transformer_blocks.1"]


@pytest.fixture(scope="module")
def llama():
    torch.manual_seed(0)
    config = transformers.LlamaConfig(hidden_size=64, intermediate_size=128,
                                      num_hidden_layers=2, num_attention_heads=2,
                                      num_key_value_heads=2, vocab_size=128)
    return transformers.LlamaForCausalLM(config)


@pytest.fixture(scope="module")
def flux():
    torch.manual_seed(0)
    return diffusers.FluxTransformer2DModel(
        patch_size=1, in_channels=4, num_layers=2, num_single_layers=2,
        attention_head_dim=16, num_attention_heads=2, joint_attention_dim=32,
        pooled_projection_dim=32, axes_dims_rope=(4, 4, 8))


def names(model, spec):
    return [name for name, _ in find_blocks(model, spec)]


def test_each_form_finds_the_llama_layers(llama):
    layers = llama.model.layers
    assert names(llama, "model.layers") == LLAMA_LAYERS
    # A ModuleList is callable (an nn.Module) but is no predicate.
    assert names(llama, layers) == LLAMA_LAYERS
    assert names(llama, list(layers)) == LLAMA_LAYERS
    assert names(llama, tuple(layers)) == LLAMA_LAYERS
    assert names(llama, [layers]) == LLAMA_LAYERS
    is_layer = lambda name, module: type(module).__name__ == "LlamaDecoderLayer"
    assert names(llama, is_layer) == LLAMA_LAYERS
    found = find_blocks(llama, layers)
    assert [module for _, module in found] == list(layers)


def test_several_lists_concatenate_in_the_order_given(flux):
    assert names(flux, [flux.transformer_blocks, flux.single_transformer_blocks]) == FLUX_BLOCKS
    assert names(flux, ["transformer_blocks", "single_transformer_blocks"]) == FLUX_BLOCKS
    assert names(flux, [list(flux.transformer_blocks),
                        list(flux.single_transformer_blocks)]) == FLUX_BLOCKS
    assert names(flux, ["transformer_blocks", flux.single_transformer_blocks[0],
                        flux.single_transformer_blocks[1]]) == FLUX_BLOCKS
    # The order given, not the model's.
    assert names(flux, [flux.single_transformer_blocks, flux.transformer_blocks]) == \
        FLUX_BLOCKS[2:] + FLUX_BLOCKS[:2]


def test_one_block_module_alone_names_its_container(llama):
    with pytest.raises(SacplanError, match=r"^blocks: got one module, model\.layers\.0 "
                       r"\(LlamaDecoderLayer\), not a container of blocks: pass its "
                       r"container 'model\.layers', or \[module\]"):
        find_blocks(llama, llama.model.layers[0])
    with pytest.raises(SacplanError, match=r"model \(LlamaModel\).*'model\.layers'"):
        find_blocks(llama, llama.model)
    # In a list it is a model of one block.
    assert names(llama, [llama.model.layers[1]]) == ["model.layers.1"]


def test_a_wrong_path_names_the_nearest(llama, flux):
    with pytest.raises(SacplanError, match=r"^blocks: model has no submodule 'layers'; "
                       r"did you mean 'model\.layers'\?$"):
        find_blocks(llama, "layers")
    with pytest.raises(SacplanError, match=r"did you mean 'model\.layers'\?$"):
        find_blocks(llama, "model.layer")
    with pytest.raises(SacplanError, match=r"no submodule 'transformer_block'; did you mean "
                       r"'transformer_blocks' or 'single_transformer_blocks'\?$"):
        find_blocks(flux, ["transformer_block", "single_transformer_blocks"])
    with pytest.raises(SacplanError, match=r"no submodule 'zzz'; give a path"):
        find_blocks(llama, "zzz")


def test_a_block_given_twice_or_inside_another_is_refused(flux):
    with pytest.raises(SacplanError, match=r"'transformer_blocks\.0' is given twice"):
        find_blocks(flux, [flux.transformer_blocks, flux.transformer_blocks[0]])
    with pytest.raises(SacplanError, match=r"'transformer_blocks\.0\.attn' is inside another "
                       r"block, 'transformer_blocks\.0'"):
        find_blocks(flux, ["transformer_blocks", "transformer_blocks.0.attn"])
    with pytest.raises(SacplanError, match="item of type int"):
        find_blocks(flux, [flux.transformer_blocks, 3])
    with pytest.raises(SacplanError, match="ModuleList given as blocks is not a submodule"):
        find_blocks(flux, nn.ModuleList([nn.Linear(2, 2)]))


class _Step(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, x):
        return x + torch.tanh(self.fc(x))


class _TwoStacks(nn.Module):
    """`late` is registered first but runs second."""

    def __init__(self, dim: int = 8):
        super().__init__()
        self.late = nn.ModuleList(_Step(dim) for _ in range(2))
        self.early = nn.ModuleList(_Step(dim) for _ in range(2))

    def forward(self, x):
        for block in list(self.early) + list(self.late):
            x = block(x)
        return x


def test_capture_takes_several_lists_and_refuses_another_order():
    model = _TwoStacks()
    x = torch.randn(2, 4, 8)
    doc = sacplan_torch.capture(model, x, blocks=[model.early, model.late], warmup=0,
                                repeats=1)
    assert [b["name"] for b in doc["blocks"]] == ["early.0", "early.1", "late.0", "late.1"]
    with pytest.raises(SacplanError, match=r"^blocks\[2\] \(early\.0\) runs before blocks\[1\] "
                       r"\(late\.1\) has run: give the blocks in the order the forward runs "
                       r"them, each once a step$"):
        sacplan_torch.capture(model, x, blocks=[model.late, model.early], warmup=0, repeats=1)
