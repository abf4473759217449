#include "sacplan/planner/solver.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "candidates.h"
#include "sacplan/planner/bytes.h"
#include "sacplan/planner/presets.h"
#include "sacplan/status_macros.h"
#include "step_constants.h"

namespace sacplan {

struct Solver::BlockClass {
  const Block* representative = nullptr;
  std::vector<BlockCandidate> candidates;
};

namespace {

using StepConstants = Solver::StepConstants;

// The highest live bytes while block b runs, given the kept bytes of the
// blocks before it.
int64_t BlockMoment(const StepConstants& c, int b, const BlockCost& cost,
                    int64_t prefix_kept_bytes) {
  return prefix_kept_bytes +
         std::max({c.forward_base[b] + cost.forward_peak_bytes,
                   c.backward_base[b] + cost.backward_peak_bytes,
                   c.forward_gather_base[b],
                   c.backward_gather_base[b] + cost.kept_bytes,
                   c.reduce_scatter_base[b]});
}

// One state of the chain DP: kept bytes of the blocks so far, the value
// minimised (time, or the running peak) and how it was reached.
struct ChainState {
  int64_t prefix_kept_bytes = 0;
  double value = 0;
  int parent = -1;     // state index in the previous layer
  int candidate = -1;  // candidate chosen for the block of this layer
};

// Collects the states of one layer, keeping the best per bucket of kept
// bytes: an array indexed by bucket, so each transition costs O(1).
class BucketLayer {
 public:
  BucketLayer(int64_t quantum_bytes, int64_t max_prefix_bytes)
      : quantum_bytes_(quantum_bytes),
        slots_(static_cast<size_t>(max_prefix_bytes / quantum_bytes + 1)) {}

  void Offer(const ChainState& state) {
    const size_t bucket = static_cast<size_t>(state.prefix_kept_bytes / quantum_bytes_);
    if (bucket >= slots_.size()) return;
    ChainState& slot = slots_[bucket];
    if (slot.candidate < 0 || state.value < slot.value ||
        (state.value == slot.value &&
         state.prefix_kept_bytes < slot.prefix_kept_bytes)) {
      slot = state;
    }
  }

  // The kept states by ascending kept bytes, without those that a state with
  // fewer kept bytes beats.
  std::vector<ChainState> Frontier() const {
    std::vector<ChainState> kept;
    for (const ChainState& s : slots_) {
      if (s.candidate < 0) continue;
      if (!kept.empty() && s.value >= kept.back().value) continue;
      kept.push_back(s);
    }
    return kept;
  }

 private:
  int64_t quantum_bytes_;
  std::vector<ChainState> slots_;
};

// At block b only the candidate's kept bytes, its moment (the bytes it adds
// to the kept prefix at its peak) and its time matter; F and B fold into the
// moment. Returns the candidates no other beats on those (on kept bytes and
// moment alone when minimising the peak), as (moment, index) sorted by
// moment so that a state can stop at the first that does not fit.
std::vector<std::pair<int64_t, int>> UsefulCandidates(
    const StepConstants& c, int b, const std::vector<BlockCandidate>& candidates,
    bool minimize_peak) {
  struct Entry {
    double time;
    int64_t kept;
    int64_t moment;
    int index;
  };
  std::vector<Entry> entries;
  entries.reserve(candidates.size());
  for (int ci = 0; ci < static_cast<int>(candidates.size()); ++ci) {
    const BlockCost& cost = candidates[ci].cost;
    entries.push_back({minimize_peak ? 0.0 : cost.recompute_ms, cost.kept_bytes,
                       BlockMoment(c, b, cost, 0), ci});
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& x, const Entry& y) {
    if (x.time != y.time) return x.time < y.time;
    if (x.kept != y.kept) return x.kept < y.kept;
    return x.moment < y.moment;
  });
  std::vector<Entry> useful;
  for (const Entry& e : entries) {
    bool beaten = false;
    for (const Entry& u : useful) {
      if (u.kept <= e.kept && u.moment <= e.moment) {
        beaten = true;
        break;
      }
    }
    if (!beaten) useful.push_back(e);
  }
  std::vector<std::pair<int64_t, int>> by_moment;
  for (const Entry& e : useful) by_moment.push_back({e.moment, e.index});
  std::sort(by_moment.begin(), by_moment.end());
  return by_moment;
}

}  // namespace

absl::StatusOr<Solver> Solver::Create(const AnalyzedModel& model,
                                      const SolverOptions& options) {
  Solver solver;
  solver.model_ = &model;
  solver.options_ = options;
  ASSIGN_OR_RETURN(StepConstants constants, ComputeStepConstants(model, options.semantics));
  solver.constants_ = std::make_shared<const StepConstants>(std::move(constants));
  // ComparedPresetNames() starts with none and full.
  for (const std::string& preset : ComparedPresetNames()) {
    SolvedPlan plan;
    ASSIGN_OR_RETURN(plan.masks, PresetMasks(model, preset));
    ASSIGN_OR_RETURN(plan.result, SimulateStep(model, plan.masks, options.semantics));
    solver.reference_plans_.push_back(std::move(plan));
  }
  const int64_t none_peak = solver.reference_plans_[0].result.peak_bytes;
  const int64_t full_peak = solver.reference_plans_[1].result.peak_bytes;
  // Candidates are thinned at the grain of the smallest budgets anyone asks
  // for (about full checkpointing's peak); states at that of each budget.
  solver.quantum_bytes_ = solver.QuantumFor(full_peak, options.memory_resolution);
  const int64_t candidate_quantum_bytes =
      std::max<int64_t>(1, solver.quantum_bytes_ / 4);

  for (size_t b = 0; b < model.blocks.size(); ++b) {
    const Block& block = model.model->blocks[b];
    BlockClass* match = nullptr;
    for (const auto& cls : solver.classes_) {
      if (SameStructure(*cls->representative, block)) match = cls.get();
    }
    if (match == nullptr) {
      auto cls = std::make_shared<BlockClass>();
      cls->representative = &block;
      const BlockAnalysis& analysis = model.blocks[b];
      cls->candidates = BlockCandidates(analysis, options.semantics,
                                        options.exhaustive_max_ops,
                                        candidate_quantum_bytes);
      match = cls.get();
      solver.classes_.push_back(std::move(cls));
    }
    solver.block_class_.push_back(match);
  }

  ASSIGN_OR_RETURN(
      SolvedPlan least,
      solver.Simulate(solver.RunChain(0, /*minimize_peak=*/true, options.memory_resolution)));
  solver.reference_plans_.push_back(std::move(least));
  solver.min_peak_ = std::numeric_limits<int64_t>::max();
  for (const SolvedPlan& plan : solver.reference_plans_) {
    solver.min_peak_ = std::min(solver.min_peak_, plan.result.peak_bytes);
  }
  // Saving everything recomputes nothing, so no plan is faster.
  solver.max_useful_peak_ = std::max(solver.min_peak_, none_peak);
  return solver;
}

int64_t Solver::MinPeakBytes() const { return min_peak_; }
int64_t Solver::MaxUsefulPeakBytes() const { return max_useful_peak_; }

int64_t Solver::ComposedPeak(const std::vector<int>& choice) const {
  const StepConstants& c = *constants_;
  int64_t prefix = 0;
  int64_t peak = c.plan_independent_peak;
  for (size_t b = 0; b < choice.size(); ++b) {
    const BlockCost& cost = block_class_[b]->candidates[choice[b]].cost;
    peak = std::max(peak, BlockMoment(c, static_cast<int>(b), cost, prefix));
    prefix += cost.kept_bytes;
  }
  return std::max(peak, prefix + c.head_base);
}

int64_t Solver::QuantumFor(int64_t budget_bytes, int resolution) const {
  return std::max<int64_t>(1, budget_bytes / std::max(1, resolution));
}

std::vector<int> Solver::RunChain(int64_t budget_bytes, bool minimize_peak,
                                  int resolution) const {
  const StepConstants& c = *constants_;
  const int64_t quantum_bytes =
      minimize_peak ? quantum_bytes_ : QuantumFor(budget_bytes, resolution);
  const int block_count = static_cast<int>(block_class_.size());
  if (!minimize_peak && c.plan_independent_peak > budget_bytes) return {};
  // Kept bytes never exceed the budget (they are live at the head), nor the
  // sum of every block's largest kept bytes.
  int64_t max_prefix_bytes = 0;
  for (const BlockClass* cls : block_class_) {
    int64_t largest = 0;
    for (const BlockCandidate& cand : cls->candidates) {
      largest = std::max(largest, cand.cost.kept_bytes);
    }
    max_prefix_bytes += largest;
  }
  if (!minimize_peak) max_prefix_bytes = std::min(max_prefix_bytes, budget_bytes);
  std::vector<std::vector<ChainState>> layers(block_count + 1);
  layers[0] = {{0, minimize_peak ? static_cast<double>(c.plan_independent_peak) : 0.0,
                -1, -1}};
  for (int b = 0; b < block_count; ++b) {
    BucketLayer next(quantum_bytes, max_prefix_bytes);
    const std::vector<BlockCandidate>& candidates = block_class_[b]->candidates;
    const std::vector<std::pair<int64_t, int>> by_moment =
        UsefulCandidates(c, b, candidates, minimize_peak);
    for (int si = 0; si < static_cast<int>(layers[b].size()); ++si) {
      const ChainState& s = layers[b][si];
      for (const auto& [own_moment, ci] : by_moment) {
        const BlockCost& cost = candidates[ci].cost;
        const int64_t moment = s.prefix_kept_bytes + own_moment;
        double value;
        if (minimize_peak) {
          value = std::max(s.value, static_cast<double>(moment));
        } else {
          if (moment > budget_bytes) break;
          value = s.value + cost.recompute_ms;
        }
        next.Offer({s.prefix_kept_bytes + cost.kept_bytes, value, si, ci});
      }
    }
    layers[b + 1] = next.Frontier();
  }
  int best = -1;
  double best_value = std::numeric_limits<double>::infinity();
  const std::vector<ChainState>& final_states = layers[block_count];
  for (int si = 0; si < static_cast<int>(final_states.size()); ++si) {
    const ChainState& s = final_states[si];
    const int64_t head = s.prefix_kept_bytes + c.head_base;
    double value = s.value;
    if (minimize_peak) {
      value = std::max(value, static_cast<double>(head));
    } else if (head > budget_bytes) {
      continue;
    }
    if (value < best_value) {
      best_value = value;
      best = si;
    }
  }
  if (best < 0) return {};
  std::vector<int> choice(block_count);
  for (int b = block_count, si = best; b > 0; --b) {
    choice[b - 1] = layers[b][si].candidate;
    si = layers[b][si].parent;
  }
  return choice;
}

void Solver::ImproveGreedily(int64_t budget_bytes, std::vector<int>& choice) const {
  bool improved = true;
  while (improved) {
    improved = false;
    for (size_t b = 0; b < choice.size(); ++b) {
      const auto& candidates = block_class_[b]->candidates;
      const int current = choice[b];
      for (int ci = 0; ci < static_cast<int>(candidates.size()); ++ci) {
        if (candidates[ci].cost.recompute_ms >= candidates[choice[b]].cost.recompute_ms) {
          continue;
        }
        const int before = choice[b];
        choice[b] = ci;
        if (ComposedPeak(choice) > budget_bytes) choice[b] = before;
      }
      improved |= choice[b] != current;
    }
  }
}

absl::StatusOr<SolvedPlan> Solver::Simulate(const std::vector<int>& choice) const {
  SolvedPlan plan;
  for (size_t b = 0; b < choice.size(); ++b) {
    plan.masks.push_back(block_class_[b]->candidates[choice[b]].mask);
  }
  ASSIGN_OR_RETURN(plan.result, SimulateStep(*model_, plan.masks, options_.semantics));
  return plan;
}

absl::StatusOr<SolvedPlan> Solver::Solve(int64_t budget_bytes) const {
  return Solve(budget_bytes, options_.memory_resolution);
}

absl::StatusOr<SolvedPlan> Solver::Solve(int64_t budget_bytes, int resolution) const {
  if (budget_bytes < min_peak_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "budget ", FormatBytes(budget_bytes), " (", budget_bytes,
        " bytes) is below the smallest feasible peak ", FormatBytes(min_peak_),
        " (", min_peak_, " bytes) for this model and semantics",
        model_->model->parallel.single_rank()
            ? std::string()
            : absl::StrCat(", ", DescribeRanks(model_->model->parallel)),
        ": no plan fits; give a budget of ", min_peak_, " bytes or more"));
  }
  std::vector<int> choice =
      RunChain(budget_bytes, /*minimize_peak=*/false, resolution);
  absl::StatusOr<SolvedPlan> best = absl::NotFoundError("no plan");
  if (!choice.empty()) {
    ImproveGreedily(budget_bytes, choice);
    ASSIGN_OR_RETURN(best, Simulate(choice));
    if (best->result.peak_bytes > budget_bytes) {
      return absl::InternalError(absl::StrCat(
          "solver and simulator disagree: plan peak ", best->result.peak_bytes,
          " exceeds budget ", budget_bytes));
    }
  }
  // Coarse buckets can lose the states near a reference plan's peak.
  for (const SolvedPlan& plan : reference_plans_) {
    if (plan.result.peak_bytes > budget_bytes) continue;
    if (!best.ok() || plan.result.step_ms < best->result.step_ms) best = plan;
  }
  return best;
}

std::vector<SolvedPlan> Solver::Frontier(int points) const {
  points = std::max(points, 2);
  std::vector<int64_t> budgets;
  for (int i = 0; i < points; ++i) {
    budgets.push_back(min_peak_ + static_cast<int64_t>(
                                      static_cast<long double>(max_useful_peak_ - min_peak_) *
                                      i / (points - 1)));
  }
  for (const SolvedPlan& plan : reference_plans_) {
    budgets.push_back(plan.result.peak_bytes);
  }
  std::vector<SolvedPlan> plans;
  for (const int64_t budget : budgets) {
    auto plan = Solve(budget, options_.frontier_resolution);
    if (plan.ok()) plans.push_back(*std::move(plan));
  }
  std::sort(plans.begin(), plans.end(),
            [](const SolvedPlan& a, const SolvedPlan& b) {
              if (a.result.peak_bytes != b.result.peak_bytes)
                return a.result.peak_bytes < b.result.peak_bytes;
              return a.result.step_ms < b.result.step_ms;
            });
  std::vector<SolvedPlan> frontier;
  for (SolvedPlan& plan : plans) {
    if (!frontier.empty() &&
        plan.result.step_ms >= frontier.back().result.step_ms) {
      continue;
    }
    frontier.push_back(std::move(plan));
  }
  return frontier;
}

}  // namespace sacplan
