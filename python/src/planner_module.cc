// sacplan_torch._planner: the planner in the Python process (nanobind).
// Each function takes a profile (and plan) as JSON text or a file path and
// returns what the command line writes, byte for byte, from the same calls
// (sacplan/api/commands.h). Errors raise _planner.PlannerError with the
// command line's one-line message; sacplan_torch turns it into
// SacplanError. The GIL is released while planning.
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>

#include "sacplan/api/commands.h"
#include "sacplan/api/host_memory.h"
#include "sacplan/api/planning.h"
#include "sacplan/planner/memory/host_memory.h"
#include "sacplan/planner/plan_io/plan.h"

namespace nb = nanobind;

namespace sacplan::python {
namespace {

struct PlannerError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <typename T>
T OrRaise(absl::StatusOr<T> value) {
  if (!value.ok()) throw PlannerError(std::string(value.status().message()));
  return *std::move(value);
}

// A document given as text (`is_path` false; errors name `name`) or as a
// file path (errors name the path, as the command line's do).
struct Source {
  Source(std::string text_or_path, bool is_path, std::string name)
      : text_or_path(std::move(text_or_path)), is_path(is_path), name(std::move(name)) {}
  std::string text_or_path;
  bool is_path;
  std::string name;
};

// The source as the api's commands take it (sacplan/api/commands.h).
api::Document ToDocument(const Source& source) {
  if (source.is_path) return {.name = source.text_or_path};
  return {.name = source.name, .text = source.text_or_path};
}

Plan LoadPlan(const Source& plan) {
  return OrRaise(plan.is_path ? ReadPlanFile(plan.text_or_path)
                              : api::LoadPlanText(plan.text_or_path, plan.name));
}

// (plan.json text, summary): `sacplan plan`. budget "" with a preset: none.
std::pair<std::string, std::string> MakePlan(const Source& profile, const std::string& budget,
                                             const std::string& budget_kind,
                                             const std::string& preset,
                                             const std::string& semantics,
                                             const std::string& host_budget,
                                             const std::string& output_name) {
  api::PlanAnswer answer = OrRaise(api::PlanCommand({.profile = ToDocument(profile),
                                                     .budget = budget,
                                                     .budget_kind = budget_kind,
                                                     .preset = preset,
                                                     .semantics = semantics,
                                                     .host_budget = host_budget,
                                                     .output = output_name,
                                                     .names = api::FlagNames::kKeywords}));
  return {std::move(answer.plan_json), std::move(answer.summary)};
}

// `sacplan simulate --json` (the line without its newline).
std::string Simulate(const Source& profile, const Source& plan,
                     const std::optional<std::string>& semantics) {
  api::SimulateAnswer answer = OrRaise(api::SimulateCommand({.profile = ToDocument(profile),
                                                             .plan = ToDocument(plan),
                                                             .semantics = semantics,
                                                             .json = true,
                                                             .names = api::FlagNames::kKeywords}));
  answer.output.pop_back();
  return std::move(answer.output);
}

// Reads the plan with the command line's reader, alone (no profile);
// raises its error.
void ReadPlan(const Source& plan) { LoadPlan(plan); }

// `sacplan compare`'s table.
std::string Compare(const Source& profile, const std::string& budget,
                    const std::string& semantics, const std::string& host_budget) {
  return OrRaise(api::CompareCommand({.profile = ToDocument(profile),
                                      .budget = budget,
                                      .semantics = semantics,
                                      .host_budget = host_budget,
                                      .names = api::FlagNames::kKeywords}))
      .table;
}

// (frontier.json text, summary): `sacplan frontier`.
std::pair<std::string, std::string> Frontier(const Source& profile, int points,
                                             const std::string& semantics,
                                             const std::string& host_budget) {
  api::FrontierAnswer answer = OrRaise(api::FrontierCommand({.profile = ToDocument(profile),
                                                             .points = points,
                                                             .semantics = semantics,
                                                             .host_budget = host_budget,
                                                             .names = api::FlagNames::kKeywords}));
  return {std::move(answer.frontier_json), std::move(answer.summary)};
}

// apply_plan's check before it pins: PlannerError with api::CheckHostFits'
// one line when `plan_host_bytes` do not fit the host memory available now
// (the node's, over `gpus`).
void CheckHostFits(int64_t plan_host_bytes, int gpus) {
  const int64_t available = OrRaise(api::AvailableHostBytes());
  const absl::Status fits = api::CheckHostFits(plan_host_bytes, available, gpus);
  if (!fits.ok()) throw PlannerError(std::string(fits.message()));
}

}  // namespace
}  // namespace sacplan::python

NB_MODULE(_planner, m) {
  using namespace sacplan::python;
  m.doc() = "sacplan's planner in-process; use sacplan_torch.plan/simulate/compare/frontier.";
  nb::exception<PlannerError>(m, "PlannerError");
  nb::class_<Source>(m, "Source")
      .def(nb::init<std::string, bool, std::string>(), nb::arg("text_or_path"),
           nb::arg("is_path"), nb::arg("name"));
  const auto release = nb::call_guard<nb::gil_scoped_release>();
  m.def("plan", &MakePlan, nb::arg("profile"), nb::arg("budget"), nb::arg("budget_kind"),
        nb::arg("preset"), nb::arg("semantics"), nb::arg("host_budget"), nb::arg("output_name"),
        release);
  m.def("read_plan", &ReadPlan, nb::arg("plan"), release);
  m.def("simulate", &Simulate, nb::arg("profile"), nb::arg("plan"),
        nb::arg("semantics").none(), release);
  m.def("compare", &Compare, nb::arg("profile"), nb::arg("budget"), nb::arg("semantics"),
        nb::arg("host_budget"), release);
  m.def("frontier", &Frontier, nb::arg("profile"), nb::arg("points"), nb::arg("semantics"),
        nb::arg("host_budget"), release);
  m.def("pinned_host_bytes", &sacplan::PinnedHostBytes, nb::arg("bytes"));
  m.def("available_host_bytes", [] { return OrRaise(sacplan::api::AvailableHostBytes()); });
  m.def("check_host_fits", &CheckHostFits, nb::arg("plan_host_bytes"), nb::arg("gpus"));
}
