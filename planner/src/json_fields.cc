#include "json_fields.h"

#include "absl/strings/str_cat.h"

namespace sacplan::json_fields {

absl::Status Error(const std::string& path, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

absl::Status WrongType(const std::string& path, const char* expected,
                       const json& got) {
  return Error(path, absl::StrCat("expected ", expected, ", got ", got.type_name()));
}

const json* Find(const json& object, const std::string& key) {
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

absl::Status RequireObject(const json& value, const std::string& path) {
  return value.is_object() ? absl::OkStatus() : WrongType(path, "an object", value);
}

absl::Status RequireArray(const json& value, const std::string& path) {
  return value.is_array() ? absl::OkStatus() : WrongType(path, "an array", value);
}

namespace {

// Shared shape of every reader: look the key up, complain if required and
// absent, otherwise hand the value to `convert`.
template <typename Convert>
absl::Status ReadField(const json& object, const std::string& key,
                       const std::string& path, bool required, Convert convert) {
  const std::string field = path.empty() ? key : absl::StrCat(path, ".", key);
  const json* value = Find(object, key);
  if (value == nullptr) {
    return required ? Error(field, "missing") : absl::OkStatus();
  }
  return convert(*value, field);
}

}  // namespace

absl::Status ReadString(const json& object, const std::string& key,
                        const std::string& path, bool required, std::string& out) {
  return ReadField(object, key, path, required,
                   [&](const json& v, const std::string& field) {
                     if (!v.is_string()) return WrongType(field, "a string", v);
                     out = v.get<std::string>();
                     return absl::OkStatus();
                   });
}

absl::Status ReadInt(const json& object, const std::string& key,
                     const std::string& path, bool required, int64_t& out) {
  return ReadField(object, key, path, required,
                   [&](const json& v, const std::string& field) {
                     if (v.is_number_integer()) {
                       out = v.get<int64_t>();
                       return absl::OkStatus();
                     }
                     // Large sizes may be written as 3.1e10.
                     if (v.is_number_float()) {
                       const double d = v.get<double>();
                       if (d == static_cast<double>(static_cast<int64_t>(d))) {
                         out = static_cast<int64_t>(d);
                         return absl::OkStatus();
                       }
                     }
                     return WrongType(field, "an integer", v);
                   });
}

absl::Status ReadNumber(const json& object, const std::string& key,
                        const std::string& path, bool required, double& out) {
  return ReadField(object, key, path, required,
                   [&](const json& v, const std::string& field) {
                     if (!v.is_number()) return WrongType(field, "a number", v);
                     out = v.get<double>();
                     return absl::OkStatus();
                   });
}

absl::Status ReadBool(const json& object, const std::string& key,
                      const std::string& path, bool required, bool& out) {
  return ReadField(object, key, path, required,
                   [&](const json& v, const std::string& field) {
                     if (!v.is_boolean()) return WrongType(field, "true or false", v);
                     out = v.get<bool>();
                     return absl::OkStatus();
                   });
}

absl::Status ReadStrings(const json& object, const std::string& key,
                         const std::string& path, bool required,
                         std::vector<std::string>& out) {
  return ReadField(object, key, path, required,
                   [&](const json& v, const std::string& field) {
                     if (!v.is_array()) return WrongType(field, "an array", v);
                     out.clear();
                     for (size_t i = 0; i < v.size(); ++i) {
                       if (!v[i].is_string()) {
                         return WrongType(absl::StrCat(field, "[", i, "]"),
                                          "a string", v[i]);
                       }
                       out.push_back(v[i].get<std::string>());
                     }
                     return absl::OkStatus();
                   });
}

absl::Status ReadInts(const json& object, const std::string& key,
                      const std::string& path, bool required,
                      std::vector<int64_t>& out) {
  return ReadField(object, key, path, required,
                   [&](const json& v, const std::string& field) {
                     if (!v.is_array()) return WrongType(field, "an array", v);
                     out.clear();
                     for (size_t i = 0; i < v.size(); ++i) {
                       if (!v[i].is_number_integer()) {
                         return WrongType(absl::StrCat(field, "[", i, "]"),
                                          "an integer", v[i]);
                       }
                       out.push_back(v[i].get<int64_t>());
                     }
                     return absl::OkStatus();
                   });
}

absl::Status Parse(const std::string& text, const std::string& what, json& out) {
  try {
    out = json::parse(text);
  } catch (const json::parse_error& e) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": not valid JSON (malformed or truncated) near byte ", e.byte));
  }
  return absl::OkStatus();
}

}  // namespace sacplan::json_fields
