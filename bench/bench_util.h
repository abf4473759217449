// What the benchmark programs share: a benchmark's setup has no one to
// return an error to, so a failed step ends the program with its reason.
#ifndef SACPLAN_BENCH_BENCH_UTIL_H_
#define SACPLAN_BENCH_BENCH_UTIL_H_

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "absl/status/statusor.h"

namespace sacplan::bench {

// The value, or "<what>: <message>" on stderr and exit status 1.
template <typename T>
T OrDie(absl::StatusOr<T> value, const std::string& what) {
  if (!value.ok()) {
    std::fprintf(stderr, "%s: %s\n", what.c_str(),
                 std::string(value.status().message()).c_str());
    std::exit(1);
  }
  return *std::move(value);
}

}  // namespace sacplan::bench

#endif  // SACPLAN_BENCH_BENCH_UTIL_H_
