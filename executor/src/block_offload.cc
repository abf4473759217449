#include "block_offload.h"

#include <vector>

namespace sacplan::executor_internal {
namespace {

// The copier for tensors on `like`'s device, made at the first copy.
HostCopies& Copier(StackState& state, const at::Tensor& like) {
  if (state.copies == nullptr) state.copies = MakeHostCopies(like.device(), state.counter->host);
  return *state.copies;
}

// The offload copies of block b's schedule.
const std::vector<OffloadCopy>& Copies(const StackState& state, int b) {
  return (*state.schedules)[b].offload.copies;
}

}  // namespace

void OffloadAfter(StackState& state, int b, int k, TensorTable& table) {
  const std::vector<OffloadCopy>& copies = Copies(state, b);
  for (size_t c = 0; c < copies.size(); ++c) {
    if (copies[c].issued_after == k) {
      state.host[b][c] = Copier(state, table[copies[c].tensor]).ToHost(table[copies[c].tensor]);
    }
  }
  for (const OffloadCopy& copy : copies) {
    if (copy.freed_after == k) table[copy.tensor].reset();
  }
}

void PrefetchBefore(StackState& state, int b, int s, TensorTable& table, bool led) {
  const std::vector<OffloadCopy>& copies = Copies(state, b);
  for (size_t c = 0; c < copies.size(); ++c) {
    if (copies[c].prefetch_before != s || copies[c].led != led) continue;
    ScopedMemoryAccount account(Account(MemoryCategory::kKept));
    table[copies[c].tensor] = state.copies->ToDevice(state.host[b][c]);
  }
}

void SpillBefore(StackState& state, int b, int k) {
  if (b == 0) return;
  const BlockCopies& before = (*state.schedules)[b - 1].offload;
  if (before.spill_trigger < 0) return;
  if (k == before.spill_trigger) state.copies->FinishCopiesToHost();
  for (const OffloadCopy& copy : before.copies) {
    if (copy.freed_before_next < 0) continue;
    if (copy.freed_before_next == k || (k == before.spill_trigger && copy.freed_before_next > k)) {
      state.live[b - 1][copy.tensor].reset();
    }
  }
}

void LeadBefore(StackState& state, int b, const ScheduleStep& step) {
  if (b == 0) return;
  const BlockCopies& before = (*state.schedules)[b - 1].offload;
  if (before.lead_trigger_op < 0 || step.kind != StepKind::kBackward ||
      step.op != before.lead_trigger_op) {
    return;
  }
  PrefetchBefore(state, b - 1, 0, state.live[b - 1], /*led=*/true);
}

void FreeWithHostCopies(StackState& state, int b, TensorTable& table,
                        std::span<const int> indices) {
  FreeAll(table, indices);
  const std::vector<OffloadCopy>& copies = Copies(state, b);
  if (copies.empty()) return;
  for (int t : indices) {
    for (size_t c = 0; c < copies.size(); ++c) {
      if (copies[c].tensor == t) state.host[b][c].reset();
    }
  }
}

}  // namespace sacplan::executor_internal
