// The writers' round trip, checked by every fuzz target: what sacplan
// writes from an input its reader accepted (the same document, as the CLI
// writes it) must be accepted by that reader again.
#ifndef SACPLAN_FUZZ_ROUND_TRIP_H_
#define SACPLAN_FUZZ_ROUND_TRIP_H_

#include <cstdint>
#include <string>

#include "sacplan/planner/plan_io/json_reader.h"

namespace sacplan::fuzz {

// `doc` as the writers' text (dump(1)), parsed and given to `read` (which
// returns a Status or StatusOr): a refusal is a bug, and traps. Text over
// the file limit is left out: the CLI's writers refuse it before writing.
template <typename Read>
void RequireReadsBack(const json_reader::json& doc, Read read) {
  const std::string text = doc.dump(1) + "\n";
  if (static_cast<int64_t>(text.size()) > json_reader::kMaxFileBytes) return;
  auto parsed = json_reader::Parse(text, "round trip");
  if (!parsed.ok() || !read(*parsed).ok()) __builtin_trap();
}

}  // namespace sacplan::fuzz

#endif  // SACPLAN_FUZZ_ROUND_TRIP_H_
