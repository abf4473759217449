// Headless Chromium for the report's browser tests: finding it, running it
// with a deadline, and reading what the page's self-check wrote.
#ifndef SACPLAN_TESTS_REPORTS_CHROMIUM_H_
#define SACPLAN_TESTS_REPORTS_CHROMIUM_H_

#include <filesystem>
#include <string>
#include <vector>

namespace sacplan::testing {

// $SACPLAN_CHROMIUM when set, else the first of chromium, chromium-browser,
// google-chrome, google-chrome-stable found on PATH; empty when none is.
std::string FindChromium();

struct BrowserRun {
  int exit_code = -1;  // -1: killed at the deadline or did not exit normally
  std::string out;     // stdout (the DOM with --dump-dom)
  std::string err;     // stderr (console messages with --enable-logging)
  double wall_ms = 0;  // process start to exit
};

// Runs `chromium --headless --no-sandbox --disable-gpu ...` on the file
// `html` with `flags` added, a private profile under `dir`, console
// messages logged to stderr, and a window of 1280x800. Killed after
// `timeout_s` seconds. No shell is involved.
BrowserRun RunChromium(const std::string& chromium, const std::vector<std::string>& flags,
                       const std::filesystem::path& html, const std::filesystem::path& dir,
                       int timeout_s = 120);

// The text of <pre id="selfcheck"> in a dumped DOM (HTML entities for
// quotes decoded); empty when absent.
std::string SelfcheckText(const std::string& dom);

// Lines of Chromium's stderr that report a console message of the page.
std::vector<std::string> ConsoleLines(const std::string& err);

}  // namespace sacplan::testing

#endif  // SACPLAN_TESTS_REPORTS_CHROMIUM_H_
