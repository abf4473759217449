// libFuzzer target: arbitrary bytes as a run log (sacplan train --log); an
// accepted log written back as the CLI writes it must read back
// (round_trip.h).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "round_trip.h"
#include "sacplan/planner/plan_io/json_reader.h"
#include "sacplan/reports/run_log.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<sacplan::json_reader::json> doc =
      sacplan::json_reader::Parse(text, "fuzz");
  if (!doc.ok()) return 0;
  if (!sacplan::reports::RunLogFromJson(*doc, "fuzz").ok()) return 0;
  sacplan::fuzz::RequireReadsBack(*doc, [](const sacplan::json_reader::json& written) {
    return sacplan::reports::RunLogFromJson(written, "fuzz");
  });
  return 0;
}
