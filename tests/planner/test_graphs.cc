#include "test_graphs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace sacplan::testing {

TensorInfo Tensor(const std::string& id, int64_t bytes, bool requires_grad) {
  TensorInfo t;
  t.id = id;
  t.bytes = bytes;
  t.dtype = "float32";
  t.shape = {bytes / 4 > 0 ? bytes / 4 : 1};
  t.requires_grad = requires_grad;
  return t;
}

Op MakeOp(const std::string& id, const std::string& kind,
          std::vector<std::string> inputs, std::vector<TensorInfo> outputs,
          std::vector<std::string> needs, double fwd_ms, double bwd_ms) {
  Op op;
  op.id = id;
  op.kind = kind;
  op.inputs = std::move(inputs);
  op.outputs = std::move(outputs);
  op.backward_needs = std::move(needs);
  op.fwd_ms = fwd_ms;
  op.bwd_ms = bwd_ms;
  return op;
}

Block ChainBlock(int index, int64_t width) {
  Block block;
  block.index = index;
  block.inputs.push_back({Tensor("x", 2 * width), InputKind::kCarried});
  block.ops.push_back(MakeOp("fc", "linear", {"x"}, {Tensor("fc.out", 4 * width)},
                             {"x"}, 3.0, 6.0));
  block.ops.back().param_bytes = 10;
  block.ops.push_back(MakeOp("act", "gelu", {"fc.out"},
                             {Tensor("act.out", 4 * width)}, {"fc.out"}, 1.0, 1.0));
  block.ops.push_back(MakeOp("add", "add", {"x", "act.out"},
                             {Tensor("add.out", 2 * width)}, {}, 0.5, 0.5));
  block.outputs = {"add.out"};
  return block;
}

Model ChainModel(int blocks, int64_t fixed_bytes) {
  Model model;
  for (int b = 0; b < blocks; ++b) model.blocks.push_back(ChainBlock(b));
  model.fixed.param_bytes = fixed_bytes;
  return model;
}

Block RandomBlock(int index, int ops, uint32_t seed, int64_t residual_bytes,
                  int64_t shared_bytes) {
  std::mt19937 rng(seed);
  auto uniform = [&](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng);
  };
  Block block;
  block.index = index;
  block.inputs.push_back({Tensor("x", residual_bytes), InputKind::kCarried});
  block.inputs.push_back({Tensor("ctx", shared_bytes), InputKind::kShared});
  std::vector<std::string> available{"x"};
  for (int k = 0; k < ops - 1; ++k) {
    const std::string id = "op" + std::to_string(k);
    std::vector<std::string> inputs{available[uniform(0, available.size() - 1)]};
    if (uniform(0, 3) == 0) inputs.push_back("ctx");
    if (uniform(0, 2) == 0 && available.size() > 1) {
      const std::string extra = available[uniform(0, available.size() - 1)];
      if (std::find(inputs.begin(), inputs.end(), extra) == inputs.end()) {
        inputs.push_back(extra);
      }
    }
    std::vector<TensorInfo> outputs{Tensor(id + ".out", 8 * uniform(1, 16))};
    if (uniform(0, 4) == 0) outputs.push_back(Tensor(id + ".stats", 8, false));
    std::vector<std::string> needs;
    for (const std::string& in : inputs) {
      if (uniform(0, 2) > 0) needs.push_back(in);
    }
    for (const TensorInfo& out : outputs) {
      if (uniform(0, 3) == 0) needs.push_back(out.id);
    }
    const char* kinds[] = {"linear", "elementwise", "add"};
    Op op = MakeOp(id, kinds[uniform(0, 2)], inputs, outputs, needs,
                   0.25 * uniform(1, 12), 0.25 * uniform(1, 20));
    op.workspace_bytes = uniform(0, 2) == 0 ? 8 * uniform(1, 4) : 0;
    op.bwd_workspace_bytes = uniform(0, 2) == 0 ? 8 * uniform(1, 4) : 0;
    op.param_bytes = uniform(0, 1) ? 8 * uniform(1, 3) : 0;
    block.ops.push_back(std::move(op));
    available.push_back(id + ".out");
  }
  block.ops.push_back(MakeOp("residual", "add", {"x", available.back()},
                             {Tensor("residual.out", residual_bytes)}, {}, 0.25,
                             0.25));
  block.outputs = {"residual.out"};
  return block;
}

Model RandomModel(int blocks, int ops, uint32_t seed, bool identical) {
  Model model;
  std::mt19937 rng(seed ^ 0x5acu);
  const int64_t residual_bytes = 8 * (2 + rng() % 11);
  const int64_t shared_bytes = 8 * (1 + rng() % 4);
  for (int b = 0; b < blocks; ++b) {
    model.blocks.push_back(RandomBlock(b, ops, identical ? seed : seed + 7919 * b,
                                       residual_bytes, shared_bytes));
  }
  model.fixed.param_bytes = 64 + rng() % 64;
  model.fixed.optimizer_state_bytes = 2 * model.fixed.param_bytes;
  model.fixed.nonblock_grad_bytes = 8 * (rng() % 4);
  model.fixed.embedding_grad_bytes = 8 * (rng() % 40);
  model.fixed.head_bytes = 8 * (rng() % 6);
  model.fixed.embedding_saved_bytes = 8 * (seed % 5);
  model.fixed.embedding_fwd_only_bytes = 8 * (seed % 4);
  // Every third model's head holds its bytes only in its forward, so that
  // the head's forward, not its backward, may be the head phase's peak.
  model.fixed.head_fwd_only_bytes = seed % 3 == 0 ? model.fixed.head_bytes : 0;
  model.fixed.head_fwd_ms = 1;
  model.fixed.head_bwd_ms = 2;
  model.fixed.optimizer_ms = 0.5;
  return model;
}

Model RandomFsdpModel(uint32_t seed) {
  Model model = RandomModel(3, 5, seed, /*identical=*/seed % 2 == 0);
  model.parallel = {4, true, 1};
  std::mt19937 rng(seed);
  model.fixed.fsdp_root_param_bytes = 8 * (rng() % 5);
  for (Block& block : model.blocks) {
    int64_t param_bytes = 0;
    for (const Op& op : block.ops) param_bytes += op.param_bytes;
    block.fsdp.unsharded_param_bytes = 8 * (1 + rng() % 16);
    block.fsdp.sharded_grad_bytes = (param_bytes + 3) / 4;
    block.fsdp.reduce_scatter_bytes = param_bytes + 8 * (rng() % 3);
    // gloo's scratch (one gathered size) on some blocks, NCCL's (none) on others.
    block.fsdp.all_gather_workspace_bytes =
        rng() % 2 == 0 ? block.fsdp.unsharded_param_bytes : 0;
    block.fsdp.reduce_scatter_workspace_bytes = 8 * (rng() % 4);
  }
  return model;
}

void AddTorchSacCosts(Model& model, uint32_t seed) {
  std::mt19937 rng(seed ^ 0xc057u);
  auto ms = [&](int lo, int hi) {
    return 0.25 * std::uniform_int_distribution<int>(lo, hi)(rng);
  };
  for (Block& block : model.blocks) {
    for (Op& op : block.ops) {
      op.checkpointed_fwd_ms = op.fwd_ms + ms(0, 4);
      op.saved_fwd_ms = *op.checkpointed_fwd_ms + ms(0, 2);
      op.checkpointed_bwd_ms = op.bwd_ms + ms(0, 2);
      op.recompute_ms = op.fwd_ms + ms(0, 8);
      op.replay_ms = ms(0, 12);
    }
  }
}

Block RandomTwoStreamBlock(int index, int ops, uint32_t seed, int64_t residual_bytes,
                           int64_t text_bytes, int64_t shared_bytes) {
  Block block = RandomBlock(index, ops, seed, residual_bytes, shared_bytes);
  std::mt19937 rng(seed * 31 + 7);
  block.inputs.insert(block.inputs.begin() + 1, {Tensor("txt", text_bytes), InputKind::kCarried});
  const std::string image = block.ops.front().outputs.front().id;
  std::vector<std::string> needs{"txt"};
  if (rng() % 2 == 0) needs.push_back(image);
  Op mix = MakeOp("txt.mix", "linear", {"txt", image}, {Tensor("txt.mix.out", text_bytes)},
                  needs, 0.25 * (1 + rng() % 8), 0.25 * (1 + rng() % 12));
  mix.param_bytes = 8 * (rng() % 3);
  Op residual = MakeOp("txt.residual", "add", {"txt", "txt.mix.out"},
                       {Tensor("txt.residual.out", text_bytes)}, {}, 0.25, 0.25);
  // Before the image stream's residual add, which stays the last op.
  block.ops.insert(block.ops.end() - 1, {std::move(mix), std::move(residual)});
  block.outputs = {"residual.out", "txt.residual.out"};
  return block;
}

Model RandomTwoStreamModel(int blocks, int ops, uint32_t seed, bool identical) {
  Model model = RandomModel(blocks, ops, seed, identical);
  const int64_t text_bytes = 8 * (1 + seed % 7);
  for (int b = 0; b < blocks; ++b) {
    const Block& plain = model.blocks[b];
    model.blocks[b] = RandomTwoStreamBlock(
        b, ops, identical ? seed : seed + 7919 * b, plain.inputs[0].tensor.bytes, text_bytes,
        plain.inputs[1].tensor.bytes);
  }
  return model;
}

Block RandomCatStreamsBlock(int index, int ops, uint32_t seed, int64_t image_bytes,
                            int64_t text_bytes, int64_t shared_bytes) {
  const int64_t joined_bytes = image_bytes + text_bytes;
  Block block = RandomBlock(index, ops, seed, joined_bytes, shared_bytes);
  block.inputs.front() = {Tensor("img", image_bytes), InputKind::kCarried};
  block.inputs.insert(block.inputs.begin() + 1, {Tensor("txt", text_bytes), InputKind::kCarried});
  block.ops.insert(block.ops.begin(), MakeOp("cat", "cat", {"txt", "img"},
                                             {Tensor("x", joined_bytes)}, {}, 0.25, 0.25));
  std::mt19937 rng(seed * 17 + 3);
  auto add_projection = [&](const std::string& stream, int64_t bytes) {
    Op proj = MakeOp(stream + ".proj", "linear", {"residual.out"},
                     {Tensor(stream + ".proj.out", bytes)}, {"residual.out"},
                     0.25 * (1 + rng() % 8), 0.25 * (1 + rng() % 12));
    proj.input_grad_bytes["residual.out"] = bytes;
    proj.param_bytes = 8 * (rng() % 3);
    block.ops.push_back(std::move(proj));
  };
  add_projection("img", image_bytes);
  add_projection("txt", text_bytes);
  block.outputs = {"img.proj.out", "txt.proj.out"};
  return block;
}

Model RandomCatStreamsModel(int blocks, int ops, uint32_t seed, bool identical) {
  Model model = RandomModel(blocks, ops, seed, identical);
  const int64_t text_bytes = 8 * (1 + seed % 7);
  for (int b = 0; b < blocks; ++b) {
    const Block& plain = model.blocks[b];
    model.blocks[b] = RandomCatStreamsBlock(b, ops, identical ? seed : seed + 7919 * b,
                                            plain.inputs[0].tensor.bytes, text_bytes,
                                            plain.inputs[1].tensor.bytes);
  }
  return model;
}

SaveMask RandomSaveMask(const BlockAnalysis& block, std::mt19937& rng) {
  SaveMask mask(block.ops.size());
  for (size_t k = 0; k < mask.size(); ++k) mask[k] = rng() % 2 == 0;
  return mask;
}

int64_t LiveAt(const StepResult& step, Phase phase, int block, const std::string& op) {
  for (const TimelinePoint& point : step.timeline) {
    if (point.where.phase == phase && point.where.block == block && point.where.op == op) {
      return point.total_bytes;
    }
  }
  ADD_FAILURE() << "no moment " << PhaseName(phase) << " " << block << " " << op;
  return -1;
}

}  // namespace sacplan::testing
