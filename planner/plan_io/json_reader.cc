#include "sacplan/planner/plan_io/json_reader.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "sacplan/status_macros.h"

namespace sacplan::json_reader {
namespace {

// A value as it appears in an error: short, on one line (dump escapes
// newlines inside strings).
std::string Shown(const json& value) {
  constexpr size_t kMaxShown = 40;
  std::string text = value.dump();
  if (text.size() > kMaxShown) text = text.substr(0, kMaxShown) + "...";
  return text;
}

// Shared shape of every field reader: look the key up, complain if required
// and absent, otherwise hand the value to `convert`.
template <typename Convert>
absl::Status ReadField(const json& object, const std::string& key,
                       const std::string& path, bool required, Convert convert) {
  const std::string field = Join(path, key);
  const json* value = Find(object, key);
  if (value == nullptr) {
    return required ? Error(field, "missing") : absl::OkStatus();
  }
  return convert(*value, field);
}

}  // namespace

absl::Status Error(const std::string& path, const std::string& what) {
  if (path.empty()) return absl::InvalidArgumentError(what);
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

absl::Status WrongType(const std::string& path, const char* expected,
                       const json& got) {
  return Error(path, absl::StrCat("expected ", expected, ", got ", got.type_name()));
}

std::string Join(const std::string& path, const std::string& key) {
  return path.empty() ? key : absl::StrCat(path, ".", key);
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

absl::Status AsInt(const json& value, const std::string& path, IntRange range,
                   int64_t& out) {
  auto out_of_range = [&] {
    return Error(path, absl::StrCat("must be an integer in [", range.min, ", ",
                                    range.max, "], got ", Shown(value)));
  };
  int64_t n = 0;
  if (value.is_number_unsigned()) {
    // nlohmann keeps non-negative integers as uint64: above INT64_MAX they
    // would wrap to negative numbers in an int64.
    const uint64_t u = value.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return out_of_range();
    }
    n = static_cast<int64_t>(u);
  } else if (value.is_number_integer()) {
    n = value.get<int64_t>();
  } else if (value.is_number_float()) {
    // 3.0 or 3e9 could be read exactly, but a float in an integer field is
    // usually a computed value that was rounded; say so rather than guess.
    return Error(path, absl::StrCat("must be an integer (no fraction or "
                                    "exponent), got ", Shown(value)));
  } else {
    return WrongType(path, "an integer", value);
  }
  if (n < range.min || n > range.max) return out_of_range();
  out = n;
  return absl::OkStatus();
}

absl::Status AsNumber(const json& value, const std::string& path,
                      NumberRange range, double& out) {
  if (!value.is_number()) return WrongType(path, "a number", value);
  const double d = value.get<double>();
  // 1e999 parses to infinity; a time of inf or a sum that overflows to it
  // would make every comparison downstream meaningless.
  if (!std::isfinite(d) || d < range.min || d > range.max) {
    return Error(path, absl::StrCat("must be a finite number in [", range.min,
                                    ", ", range.max, "], got ", Shown(value)));
  }
  out = d;
  return absl::OkStatus();
}

absl::Status AsString(const json& value, const std::string& path,
                      std::string& out) {
  if (!value.is_string()) return WrongType(path, "a string", value);
  out = value.get<std::string>();
  return absl::OkStatus();
}

absl::Status ReadString(const json& object, const std::string& key,
                        const std::string& path, bool required, std::string& out) {
  return ReadField(object, key, path, required,
                   [&](const json& v, const std::string& field) {
                     return AsString(v, field, out);
                   });
}

absl::Status ReadInt(const json& object, const std::string& key,
                     const std::string& path, bool required, int64_t& out,
                     IntRange range) {
  return ReadField(object, key, path, required,
                   [&](const json& v, const std::string& field) {
                     return AsInt(v, field, range, out);
                   });
}

absl::Status ReadInt32(const json& object, const std::string& key,
                       const std::string& path, bool required, int& out,
                       IntRange range) {
  range.min = std::max<int64_t>(range.min, std::numeric_limits<int>::min());
  range.max = std::min<int64_t>(range.max, std::numeric_limits<int>::max());
  int64_t n = out;
  RETURN_IF_ERROR(ReadInt(object, key, path, required, n, range));
  out = static_cast<int>(n);
  return absl::OkStatus();
}

absl::Status ReadNumber(const json& object, const std::string& key,
                        const std::string& path, bool required, double& out,
                        NumberRange range) {
  return ReadField(object, key, path, required,
                   [&](const json& v, const std::string& field) {
                     return AsNumber(v, field, range, out);
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
                     std::vector<std::string> read(v.size());
                     for (size_t i = 0; i < v.size(); ++i) {
                       RETURN_IF_ERROR(
                           AsString(v[i], absl::StrCat(field, "[", i, "]"), read[i]));
                     }
                     out = std::move(read);
                     return absl::OkStatus();
                   });
}

absl::Status ReadInts(const json& object, const std::string& key,
                      const std::string& path, bool required,
                      std::vector<int64_t>& out, IntRange range) {
  return ReadField(object, key, path, required,
                   [&](const json& v, const std::string& field) {
                     if (!v.is_array()) return WrongType(field, "an array", v);
                     std::vector<int64_t> read(v.size());
                     for (size_t i = 0; i < v.size(); ++i) {
                       RETURN_IF_ERROR(AsInt(
                           v[i], absl::StrCat(field, "[", i, "]"), range, read[i]));
                     }
                     out = std::move(read);
                     return absl::OkStatus();
                   });
}

namespace {

// Deepest nesting of `text` outside strings, stopping at the first byte
// that goes past `limit` (its offset goes to `at`). Linear and
// allocation-free, so it runs before the parser on any input.
int NestingDepth(std::string_view text, int limit, size_t& at) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (depth > limit) {
        at = i;
        return depth;
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

// `size` says how large: "67108865 bytes", or "more than ..." for a pipe.
absl::Status TooLarge(const std::string& what, const std::string& size) {
  return absl::InvalidArgumentError(
      absl::StrCat(what, ": input of ", size, " is larger than the limit of ",
                   kMaxFileBytes, " bytes (64 MiB)"));
}

}  // namespace

absl::StatusOr<json> Parse(std::string_view text, const std::string& what) {
  if (static_cast<int64_t>(text.size()) > kMaxFileBytes) {
    return TooLarge(what, absl::StrCat(text.size(), " bytes"));
  }
  // JSON text holds no raw NUL (strings escape it as \u0000), and the
  // parser would take one as the end of the input, accepting whatever
  // follows it.
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": not valid JSON: a NUL byte at byte ", nul));
  }
  size_t at = 0;
  if (NestingDepth(text, kMaxDepth, at) > kMaxDepth) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": JSON nested deeper than ", kMaxDepth,
                     " levels (at byte ", at, ")"));
  }
  json doc;
  try {
    doc = json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": not valid JSON (malformed or truncated) near byte ", e.byte));
  } catch (const json::out_of_range&) {
    // A number such as 1e999 that no double holds.
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": a number is too large for a double (e.g. 1e999)"));
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": not valid JSON (", e.what(), ")"));
  }
  return doc;
}

absl::StatusOr<json> ReadJsonFile(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "rb"),
                                             &std::fclose);
  if (file == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
  }
  struct stat info {};
  if (fstat(fileno(file.get()), &info) == 0 && S_ISDIR(info.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read ", path, ": is a directory"));
  }
  if (fstat(fileno(file.get()), &info) == 0 && S_ISREG(info.st_mode) &&
      info.st_size > kMaxFileBytes) {
    return TooLarge(path, absl::StrCat(info.st_size, " bytes"));
  }
  // Pipes and devices have no size up front: read at most one byte past
  // the limit to tell.
  std::string text;
  char buffer[1 << 16];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, file.get())) > 0) {
    text.append(buffer, n);
    if (static_cast<int64_t>(text.size()) > kMaxFileBytes) {
      return TooLarge(path, absl::StrCat("more than ", kMaxFileBytes, " bytes"));
    }
  }
  if (std::ferror(file.get())) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
  }
  return Parse(text, path);
}

}  // namespace sacplan::json_reader
