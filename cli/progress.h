// A progress bar on stderr for long work ("label [#####-----] 12/30 text"),
// redrawn in place. Drawn only when stderr is a terminal, so logs and pipes
// stay clean.
#ifndef SACPLAN_CLI_PROGRESS_H_
#define SACPLAN_CLI_PROGRESS_H_

#include <string>

namespace sacplan::cli {

bool ProgressVisible();

// Draws the bar; ends the line when done == total.
void DrawProgress(const std::string& label, int done, int total,
                  const std::string& suffix = "");

}  // namespace sacplan::cli

#endif  // SACPLAN_CLI_PROGRESS_H_
