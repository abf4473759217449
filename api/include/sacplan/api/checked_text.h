// The text of sacplan's own formats, checked against their readers before
// anything is written (docs/profile_format.md#limits): a writer never
// produces what its own reader would refuse.
#ifndef SACPLAN_API_CHECKED_TEXT_H_
#define SACPLAN_API_CHECKED_TEXT_H_

#include <string>
#include "absl/strings/string_view.h"

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sacplan/planner/plan_io/json_reader.h"
#include "sacplan/status_macros.h"

namespace sacplan::api {

// "cannot write <name>: <why>".
inline absl::Status RefuseToWrite(const std::string& name, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("cannot write ", name, ": ", why));
}

// `doc` as every writer prints it (dump(1) and a newline), once it fits the
// readers' file limit and `read` (the format's reader: json -> Status)
// accepts it.
template <typename Read>
absl::StatusOr<std::string> CheckedJsonText(const nlohmann::json& doc, const std::string& name,
                                            Read read) {
  std::string text = doc.dump(1) + "\n";
  if (static_cast<int64_t>(text.size()) > json_reader::kMaxFileBytes) {
    return RefuseToWrite(name, absl::StrFormat(
                                   "%d bytes (%.1f MB), larger than the readers' limit of "
                                   "%d bytes (64 MiB)",
                                   text.size(), static_cast<double>(text.size()) / 1e6,
                                   json_reader::kMaxFileBytes));
  }
  ASSIGN_OR_RETURN(const nlohmann::json parsed, json_reader::Parse(text, name));
  if (absl::Status read_back = read(parsed); !read_back.ok()) {
    return RefuseToWrite(name, read_back.message());
  }
  return text;
}

}  // namespace sacplan::api

#endif  // SACPLAN_API_CHECKED_TEXT_H_
