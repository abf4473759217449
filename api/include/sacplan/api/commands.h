// The planning commands in one call each: `sacplan plan`, `simulate`,
// `compare` and `frontier` hand their flags, as the user typed them, to one
// function here and get back everything they print or write. The command
// line (cli/cmd_*.cc) and the Python extension (python/src/planner_module.cc)
// both call these, so they give the same bytes and the same errors.
//
// Each call parses and checks every flag before it reads any file, then
// reads the profile (and plan), plans, and returns text. Nothing is written:
// the caller writes the answer where it likes (atomically) and prints the
// summary. Pure C++ on the planner: no LibTorch, no CUDA.
//
// Errors are absl::Status with one line naming the problem: a bad flag's
// line starts with the flag as the caller spells it (FlagNames) and the
// text given, e.g. "--budget '12XB': ..."; a profile's or plan's starts
// with its Document::name (a path, or the caller's name for text).
// Bad input is InvalidArgument; a budget no plan meets is the solver's
// FailedPrecondition, naming the smallest feasible peak.
#ifndef SACPLAN_API_COMMANDS_H_
#define SACPLAN_API_COMMANDS_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace sacplan::api {

// How errors name a flag: as the command line spells it ("--host-budget")
// or as sacplan_torch's keyword arguments do ("host_budget").
enum class FlagNames { kCommandLine, kKeywords };

// A profile or plan as the caller holds it: the path of its JSON file, or
// the JSON text itself.
struct Document {
  std::string name{};  // the file's path; with `text`, what errors call it
  std::optional<std::string> text{};  // the JSON text; absent: read the file `name`
};

// `sacplan plan`: the fastest plan whose simulated peak fits the budget,
// or a preset simulated the same way.
struct PlanFlags {
  Document profile{};
  // Peak memory budget: "70GB", "29GiB", "512MiB" or a byte count, at most
  // 2^53 bytes. Empty: none (then `preset` is needed).
  std::string budget{};
  std::string budget_kind = "allocated";  // what `budget` caps: allocated or reserved
  std::string preset{};                   // a preset name; empty: solve for `budget`
  std::string semantics = "sacplan";      // sacplan or torch-sac
  // Offload: pinned host bytes the plan may hold. "0" (none), "auto" (the
  // profile's share of host memory; needs a host link), a size as
  // `budget`, or empty: auto when the profile has a host link, none
  // otherwise.
  std::string host_budget{};
  // Where the caller will write plan.json. The text is checked against the
  // plan reader first; errors read "cannot write <output>: ...".
  std::string output{};
  FlagNames names = FlagNames::kCommandLine;
};
struct PlanAnswer {
  std::string plan_json{};  // plan.json, as the plan reader accepts it, ending in "\n"
  std::string summary{};    // lines printed before "wrote <output>", each ending in "\n"
};
absl::StatusOr<PlanAnswer> PlanCommand(const PlanFlags& flags);

// `sacplan simulate`: one training step replayed under a plan (made by
// sacplan or edited by hand). Errors: the plan's name and why it does not
// match the profile (model, config, fingerprint, blocks, op ids).
struct SimulateFlags {
  Document profile{};
  Document plan{};
  // sacplan or torch-sac; absent: the plan's own. Present but empty is an
  // error, not "the plan's own".
  std::optional<std::string> semantics{};
  bool json = false;  // answer with one line of JSON instead of the text summary
  FlagNames names = FlagNames::kCommandLine;
};
struct SimulateAnswer {
  // What the command prints: with `json`, one line of JSON (peak_bytes,
  // reserved_peak_bytes, step_ms, ..., prediction_holds) and "\n";
  // otherwise the text summary, each line ending in "\n".
  std::string output{};
};
absl::StatusOr<SimulateAnswer> SimulateCommand(const SimulateFlags& flags);

// `sacplan compare`: every preset and the optimal plan at one budget.
struct CompareFlags {
  Document profile{};
  std::string budget{};  // as PlanFlags::budget, but required
  std::string semantics = "sacplan";
  // As PlanFlags::host_budget; when it is not none, an offload row joins
  // the table beside the optimal plan.
  std::string host_budget{};
  FlagNames names = FlagNames::kCommandLine;
};
struct CompareAnswer {
  std::string table{};  // the heading line, the column heads and one row per plan
};
absl::StatusOr<CompareAnswer> CompareCommand(const CompareFlags& flags);

// `sacplan frontier`: the Pareto frontier of peak memory vs step time, with
// the presets beside it (schema sacplan.frontier/1, docs/cli.md).
struct FrontierFlags {
  Document profile{};
  int points = 64;  // budgets tried, in [2, 1000] (kMaxFrontierPoints, planning.h)
  std::string semantics = "sacplan";
  std::string host_budget{};  // as PlanFlags::host_budget
  FlagNames names = FlagNames::kCommandLine;
};
struct FrontierAnswer {
  std::string frontier_json{};  // frontier.json, ending in "\n"
  std::string summary{};        // the line printed before "wrote <path>", ending in "\n"
};
absl::StatusOr<FrontierAnswer> FrontierCommand(const FrontierFlags& flags);

}  // namespace sacplan::api

#endif  // SACPLAN_API_COMMANDS_H_
