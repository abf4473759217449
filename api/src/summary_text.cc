// The text summaries `sacplan plan` and `simulate` print (planning.h):
// bytes for people, where a peak is, a step's figures.
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sacplan/api/planning.h"
#include "sacplan/planner/ir/bytes.h"

namespace sacplan::api {

std::string BytesForHumans(int64_t bytes) {
  return absl::StrCat(FormatBytes(bytes), " (", bytes, " bytes)");
}

std::string DescribeLocation(const StepLocation& where) {
  std::string text = PhaseName(where.phase);
  if (where.block >= 0) absl::StrAppend(&text, " of block ", where.block);
  if (!where.op.empty()) absl::StrAppend(&text, ", op ", where.op);
  return text;
}

std::string RanksNote(const Model& model) {
  const std::string ranks = DescribeRanks(model.parallel);
  return ranks.empty() ? ranks : ", " + ranks;
}

std::string StepSummary(const StepResult& result) {
  std::string comm =
      result.comm_ms > 0 ? absl::StrFormat(", exposed collectives %.2f", result.comm_ms)
                         : std::string();
  if (result.offloaded_bytes > 0) {
    absl::StrAppendFormat(&comm, ", exposed copies %.2f", result.exposed_copy_ms);
  }
  // Only a profile with host times has any (docs/memory_model.md, "Two
  // timelines").
  if (result.host_wait_ms > 0) {
    absl::StrAppendFormat(&comm, ", waiting for the host %.2f", result.host_wait_ms);
  }
  const std::string offload =
      result.offloaded_bytes > 0
          ? absl::StrFormat("  offload    %s to the host, host peak %s\n",
                            BytesForHumans(result.offloaded_bytes),
                            BytesForHumans(result.host_peak_bytes))
          : std::string();
  return absl::StrFormat(
      "  peak       %s, reached in %s\n"
      "  step       %.2f ms (forward %.2f, backward %.2f, recompute %.2f, "
      "optimizer %.2f, overhead %.2f%s)\n"
      "  recompute  %d ops, %.2f ms\n",
      BytesForHumans(result.peak_bytes), DescribeLocation(result.peak), result.step_ms,
      result.forward_ms, result.backward_ms, result.recompute_ms, result.optimizer_ms,
      result.overhead_ms, comm, result.recomputed_ops, result.recompute_ms) + offload;
}

std::string ReservedSummary(const AllocatorStats& stats) {
  return absl::StrFormat(
      "  reserved   %s predicted for PyTorch's caching allocator (blocks "
      "allocated %s, %d segments)\n",
      BytesForHumans(stats.reserved_peak_bytes), FormatBytes(stats.allocated_peak_bytes),
      stats.segments);
}

}  // namespace sacplan::api
