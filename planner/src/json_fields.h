// Strict field readers for the JSON contracts (internal to planner/). Each
// names the field's path in its error, e.g. "blocks[2].ops[5].fwd_ms:
// expected a number, got string".
#ifndef SACPLAN_PLANNER_SRC_JSON_FIELDS_H_
#define SACPLAN_PLANNER_SRC_JSON_FIELDS_H_

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"

namespace sacplan::json_fields {

using nlohmann::json;

absl::Status Error(const std::string& path, const std::string& what);
absl::Status WrongType(const std::string& path, const char* expected,
                       const json& got);
// Object member `key` of `object`, or nullptr when absent. `object` must
// already be known to be an object.
const json* Find(const json& object, const std::string& key);

absl::Status RequireObject(const json& value, const std::string& path);
absl::Status RequireArray(const json& value, const std::string& path);

// Readers: `required` false leaves `out` unchanged when the key is absent.
absl::Status ReadString(const json& object, const std::string& key,
                        const std::string& path, bool required, std::string& out);
absl::Status ReadInt(const json& object, const std::string& key,
                     const std::string& path, bool required, int64_t& out);
absl::Status ReadNumber(const json& object, const std::string& key,
                        const std::string& path, bool required, double& out);
absl::Status ReadBool(const json& object, const std::string& key,
                      const std::string& path, bool required, bool& out);
absl::Status ReadStrings(const json& object, const std::string& key,
                         const std::string& path, bool required,
                         std::vector<std::string>& out);
absl::Status ReadInts(const json& object, const std::string& key,
                      const std::string& path, bool required,
                      std::vector<int64_t>& out);

// Parses text; malformed or truncated input names `what` and the byte offset.
absl::Status Parse(const std::string& text, const std::string& what, json& out);

}  // namespace sacplan::json_fields

#define SACPLAN_RETURN_IF_ERROR(expr)            \
  do {                                           \
    if (absl::Status _status = (expr); !_status.ok()) return _status; \
  } while (false)

#endif  // SACPLAN_PLANNER_SRC_JSON_FIELDS_H_
