#include "progress.h"

#include <unistd.h>

#include <cstdio>

namespace sacplan::cli {

bool ProgressVisible() { return isatty(STDERR_FILENO) != 0; }

void DrawProgress(const std::string& label, int done, int total,
                  const std::string& suffix) {
  if (!ProgressVisible()) return;
  constexpr int kWidth = 30;
  const int filled = total > 0 ? done * kWidth / total : kWidth;
  std::string bar(filled, '#');
  bar.append(kWidth - filled, '-');
  // \033[K clears what a longer previous line left behind.
  std::fprintf(stderr, "\r%s [%s] %d/%d %s\033[K", label.c_str(), bar.c_str(), done,
               total, suffix.c_str());
  if (done == total) std::fputc('\n', stderr);
  std::fflush(stderr);
}

}  // namespace sacplan::cli
