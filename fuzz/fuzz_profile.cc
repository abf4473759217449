// libFuzzer target: arbitrary bytes as a profile.json, through the reader,
// the analysis and one simulated step. Any crash, sanitizer report or
// exception escaping is a bug: bad input must come back as a Status. What
// the writer makes of an accepted profile must read back (round_trip.h).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "checked_step.h"
#include "round_trip.h"
#include "sacplan/planner/plan_io/json_reader.h"
#include "sacplan/planner/search/presets.h"
#include "sacplan/planner/plan_io/profile.h"
#include "sacplan/planner/memory/simulator.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sacplan;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<json_reader::json> doc = json_reader::Parse(text, "fuzz");
  if (!doc.ok()) return 0;
  absl::StatusOr<Profile> profile = ProfileFromJson(*doc);
  if (!profile.ok()) return 0;
  // What every command does next: write it back, analyse, simulate.
  fuzz::RequireReadsBack(ProfileToJson(*profile), [](const json_reader::json& written) {
    return ProfileFromJson(written);
  });
  absl::StatusOr<AnalyzedModel> model = AnalyzeModel(profile->model);
  if (!model.ok()) return 0;
  for (const char* preset : {"full", "none"}) {
    absl::StatusOr<std::vector<SaveMask>> masks = PresetMasks(*model, preset);
    if (!masks.ok()) continue;
    for (Semantics semantics : {Semantics::kSacplan, Semantics::kTorchSac}) {
      (void)fuzz::CheckedStep(*model, *masks, semantics);
    }
  }
  return 0;
}
