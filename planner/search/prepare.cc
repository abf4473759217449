// Stage 0 of the search (search/pipeline.cc): what every solve of one
// solver shares. The step constants; the presets, which a solve falls back
// on; and per block the candidates a solve starts from: every save set of
// a small block, the (kept, recompute) frontier and its one-op neighbours
// of a mid-sized one (eager), and for a captured block of a hundred ops
// and more (lazy) a coarse frontier whose neighbours each solve adds
// around its picks. With offload, each block's candidates also get
// offload variants.
#include <algorithm>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <numeric>
#include <string>
#include <utility>

#include "sacplan/planner/memory/host_memory.h"
#include "sacplan/planner/search/presets.h"
#include "sacplan/status_macros.h"
#include "search/offload_candidates.h"
#include "search/parallel_for.h"
#include "search/search_constants.h"
#include "search/solver_core.h"

namespace sacplan {

absl::Status SolverCore::Prepare(const AnalyzedModel& model, const SolverOptions& options) {
  model_ = &model;
  options_ = options;
  ASSIGN_OR_RETURN(constants_, ComputeStepConstants(model, options.semantics));
  // ComparedPresetNames() starts with none and full. Full's peak sets the
  // candidates' grain below; the other presets are simulated beside the
  // frontiers that need it.
  const std::vector<std::string> preset_names = ComparedPresetNames();
  reference_plans_.resize(preset_names.size());
  std::vector<absl::Status> preset_status(preset_names.size());
  auto simulate_preset = [&](size_t i) {
    SolvedPlan& plan = reference_plans_[i];
    absl::StatusOr<std::vector<SaveMask>> masks = PresetMasks(model, preset_names[i]);
    if (!masks.ok()) {
      preset_status[i] = masks.status();
      return;
    }
    plan.masks = *std::move(masks);
    absl::StatusOr<StepResult> result = SimulateStep(model, plan.masks, options.semantics);
    if (result.ok()) {
      plan.result = *std::move(result);
    } else {
      preset_status[i] = result.status();
    }
  };
  constexpr size_t kFull = 1;
  simulate_preset(kFull);
  RETURN_IF_ERROR(preset_status[kFull]);
  const int64_t full_peak = reference_plans_[kFull].result.peak_bytes;
  // Candidates are thinned at the grain of the smallest budgets anyone asks
  // for (about full checkpointing's peak); states at that of each budget.
  quantum_bytes_ = QuantumFor(full_peak, options.memory_resolution);
  const int64_t candidate_quantum_bytes =
      std::max<int64_t>(1, quantum_bytes_ / kSearch.candidate_grain_divisor);

  const int block_count = static_cast<int>(model.blocks.size());
  block_candidates_.resize(block_count);
  // Per lazy class, its blocks (not those the same as an earlier one).
  std::map<BlockClass*, std::vector<int>> lazy_members;
  // Per block, the first block the same as it, times too (itself if none),
  // whose candidates it takes.
  std::vector<int> same_as(block_count);
  for (int b = 0; b < block_count; ++b) {
    const Block& block = model.model->blocks[b];
    const BlockAnalysis& analysis = model.blocks[b];
    int& same = same_as[b];
    // Blocks of one structure differ where their outputs' gradients arrive
    // otherwise (BlockAnalysis::output_grads: the last block's come from
    // the head).
    while (same < b && !(SameStructure(model.model->blocks[same], block) &&
                         model.blocks[same].output_grads == analysis.output_grads)) {
      ++same;
    }
    if (same < b) {
      block_class_.push_back(block_class_[same]);
      continue;
    }
    const bool eager = EnumeratesEverySaveSet(
        analysis, std::max(options.exhaustive_max_ops, options.eager_neighbours_max_ops));
    BlockClass* match = nullptr;
    for (const auto& cls : classes_) {
      if (cls->lazy && !eager && SameMemoryStructure(*cls->representative, block) &&
          cls->analysis->output_grads == analysis.output_grads) {
        match = cls.get();
        break;
      }
    }
    if (match == nullptr) {
      auto cls = std::make_shared<BlockClass>();
      cls->representative = &block;
      cls->analysis = &analysis;
      cls->lazy = !eager;
      match = cls.get();
      classes_.push_back(std::move(cls));
    }
    block_class_.push_back(match);
    if (eager) {
      block_candidates_[b] = std::make_shared<const std::vector<BlockCandidate>>(
          BlockCandidates(analysis, options.semantics, options.exhaustive_max_ops,
                          candidate_quantum_bytes));
    } else {
      lazy_members[match].push_back(b);
    }
  }
  // A lazy class's blocks start from one frontier, in their mean times,
  // plus each block's own at a coarser grain, costed in its own times and
  // reduced to its own Pareto candidates. Blocks timed one by one differ
  // enough that another block's frontier alone costs a plan up to a
  // percent, but a fine frontier programme per class, not per block, is
  // what lets a model of tens of captured blocks plan in a fraction of a
  // second. The simulations, which only memory decides, are shared.
  struct LazyClass {
    BlockClass* cls;
    std::vector<int> members;
    std::vector<SaveMask> shared_masks;
    std::vector<std::vector<SaveMask>> own_masks;  // per member, when more than one
  };
  std::vector<LazyClass> lazy;
  for (auto& [cls, members] : lazy_members) {
    lazy.push_back({cls, std::move(members), {}, {}});
    if (lazy.back().members.size() > 1) lazy.back().own_masks.resize(lazy.back().members.size());
  }
  // The frontiers and the other presets, side by side, longest first: each
  // class's frontier in its mean times is the finest.
  std::vector<std::function<void()>> tasks;
  for (LazyClass& group : lazy) {
    tasks.push_back([&] {
      std::vector<const BlockAnalysis*> analyses;
      for (const int b : group.members) analyses.push_back(&model.blocks[b]);
      group.shared_masks =
          InitialSaveMasks(MeanTimes(analyses), options.semantics, options.exhaustive_max_ops,
                           kSearch.frontier_label_grain * candidate_quantum_bytes);
    });
  }
  for (size_t i = 0; i < preset_names.size(); ++i) {
    if (i != kFull) tasks.push_back([&, i] { simulate_preset(i); });
  }
  for (LazyClass& group : lazy) {
    for (size_t m = 0; m < group.own_masks.size(); ++m) {
      tasks.push_back([&, m] {
        group.own_masks[m] =
            InitialSaveMasks(model.blocks[group.members[m]], options.semantics,
                             options.exhaustive_max_ops,
                             kSearch.own_frontier_label_grain * candidate_quantum_bytes);
      });
    }
  }
  ParallelFor(static_cast<int>(tasks.size()), SolverThreads(options.threads),
              [&](int t) { tasks[t](); });
  for (const absl::Status& status : preset_status) RETURN_IF_ERROR(status);
  const int64_t none_peak = reference_plans_[0].result.peak_bytes;
  for (LazyClass& group : lazy) {
    ParallelFor(static_cast<int>(group.members.size()), SolverThreads(options.threads),
                [&](int m) {
                  const int b = group.members[m];
                  const BlockAnalysis& analysis = model.blocks[b];
                  std::vector<SaveMask> masks = group.shared_masks;
                  if (!group.own_masks.empty()) {
                    masks.insert(masks.end(),
                                 std::make_move_iterator(group.own_masks[m].begin()),
                                 std::make_move_iterator(group.own_masks[m].end()));
                    SortUnique(masks);
                  }
                  block_candidates_[b] =
                      std::make_shared<const std::vector<BlockCandidate>>(CostedCandidates(
                          masks, candidate_quantum_bytes, [&](const SaveMask& mask) {
                            return InTimesOf(analysis, mask,
                                             group.cls->Simulate(mask, options.semantics));
                          }));
                });
  }
  const HostLink& link = model.model->host_link;
  if (options.offload && link.available()) {
    const int64_t host_budget =
        options.host_budget_bytes >= 0 ? options.host_budget_bytes : AutoHostBudgetBytes(link);
    host_cap_bytes_ = host_budget / block_count;
  }
  // With offload, a block's candidates also depend on its copy windows
  // (the last block has none of its own).
  std::vector<int> offload_same_as = same_as;
  enumerates_every_block_ =
      std::all_of(model.blocks.begin(), model.blocks.end(), [&](const BlockAnalysis& analysis) {
        return EnumeratesEverySaveSet(analysis, options.exhaustive_max_ops);
      });
  if (offloads()) {
    std::vector<CopyWindows> windows;
    for (int b = 0; b < block_count; ++b) {
      windows.push_back(WindowsOf(model.blocks, b));
      windows_ = windows_ || !(windows.back() == CopyWindows());
    }
    const CandidateLists keep_or_recompute = block_candidates_;
    for (int b = 0; b < block_count; ++b) {
      int& same = offload_same_as[b];
      same = same_as[b];
      while (same < b && (same_as[same] != same_as[b] || !(windows[same] == windows[b]))) ++same;
      if (same != b) continue;
      const OffloadChoice offload{link, host_cap_bytes_, windows[b]};
      const BlockAnalysis& analysis = model.blocks[b];
      // Every save set of a small block gets offload variants, which keeps
      // the solver exact there (SolverOffloadTest).
      const bool exhaustive = EnumeratesEverySaveSet(analysis, options.exhaustive_max_ops);
      const std::vector<SaveMask> every_save_set =
          exhaustive ? InitialSaveMasks(analysis, options.semantics, options.exhaustive_max_ops, 1)
                     : std::vector<SaveMask>();
      // A larger block whose class already chose under other windows costs
      // those choices again instead.
      block_candidates_[b] = std::make_shared<const std::vector<BlockCandidate>>(
          !exhaustive && same_as[b] != b
              ? WithOtherWindows(analysis, options.semantics,
                                 *block_candidates_[same_as[b]], offload,
                                 candidate_quantum_bytes)
              : WithOffload(analysis, options.semantics, *keep_or_recompute[same_as[b]],
                            every_save_set, offload, candidate_quantum_bytes));
    }
  }
  for (int b = 0; b < block_count; ++b) {
    block_candidates_[b] = block_candidates_[offload_same_as[b]];
  }

  for (const auto& list : block_candidates_) {
    std::vector<int> order(list->size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int x, int y) {
      const BlockCost& a = (*list)[x].cost;
      const BlockCost& b = (*list)[y].cost;
      if (a.kept_bytes != b.kept_bytes) return a.kept_bytes < b.kept_bytes;
      return CandidateMs(a) < CandidateMs(b);
    });
    std::vector<int> rank(order.size());
    for (size_t r = 0; r < order.size(); ++r) rank[order[r]] = static_cast<int>(r);
    kept_order_.push_back(std::move(order));
    kept_rank_.push_back(std::move(rank));
  }

  presets_min_peak_ = std::numeric_limits<int64_t>::max();
  for (const SolvedPlan& plan : reference_plans_) {
    presets_min_peak_ = std::min(presets_min_peak_, plan.result.peak_bytes);
  }
  // Saving everything recomputes nothing, so no plan is faster.
  max_useful_peak_ = none_peak;
  return absl::OkStatus();
}

}  // namespace sacplan
