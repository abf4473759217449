#include "sacplan/api/host_memory.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "sacplan/planner/ir/bytes.h"

namespace sacplan::api {

absl::StatusOr<int64_t> MemAvailableBytes(const std::string& meminfo) {
  for (absl::string_view line : absl::StrSplit(meminfo, '\n')) {
    if (!absl::ConsumePrefix(&line, "MemAvailable:")) continue;
    line = absl::StripAsciiWhitespace(line);
    // The kernel writes "MemAvailable:   67512340 kB".
    int64_t kib = 0;
    if (!absl::ConsumeSuffix(&line, "kB") ||
        !absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &kib) || kib < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("/proc/meminfo: MemAvailable does not read: '", line, "'"));
    }
    return kib * 1024;
  }
  return absl::NotFoundError("/proc/meminfo has no MemAvailable line");
}

absl::StatusOr<int64_t> AvailableHostBytes() {
  if (const char* text = std::getenv(kHostAvailableEnv); text != nullptr) {
    absl::StatusOr<int64_t> bytes = ParseBytes(text);
    if (!bytes.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(kHostAvailableEnv, ": ", bytes.status().message()));
    }
    return *bytes;
  }
  std::ifstream file("/proc/meminfo");
  if (file) {
    std::stringstream text;
    text << file.rdbuf();
    absl::StatusOr<int64_t> bytes = MemAvailableBytes(text.str());
    if (bytes.ok()) return bytes;
  }
  const long pages = sysconf(_SC_AVPHYS_PAGES);
  const long page_bytes = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_bytes <= 0) {
    return absl::UnavailableError(
        "cannot tell the available host memory (no /proc/meminfo, no sysconf); set " +
        std::string(kHostAvailableEnv));
  }
  return static_cast<int64_t>(pages) * page_bytes;
}

absl::Status CheckHostFits(int64_t plan_host_bytes, int64_t available_bytes, int gpus) {
  gpus = std::max(gpus, 1);
  const int64_t per_gpu_bytes = available_bytes / gpus;
  if (plan_host_bytes <= per_gpu_bytes) return absl::OkStatus();
  const std::string share =
      gpus == 1 ? std::string()
                : absl::StrCat(" (", FormatBytes(available_bytes), " over ", gpus, " GPUs)");
  return absl::FailedPreconditionError(absl::StrCat(
      "plan needs ", FormatBytes(plan_host_bytes), " of pinned host memory; ",
      FormatBytes(per_gpu_bytes), " is available", gpus == 1 ? "" : " per GPU", share,
      ": plan with --host-budget auto or a smaller --host-budget"));
}

}  // namespace sacplan::api
