// sacplan_torch._planner: the planner in the Python process (nanobind).
// The planning functions take a profile (and plan) as JSON text or a file
// path and return what the command line writes, byte for byte, from the
// same calls (sacplan/api/commands.h). The rest give sacplan_torch the
// facts the planner derives, so that Python repeats none of its rules
// (sacplan/api/bridge_rules.h, outside_blocks.h, the presets, the limits,
// the host link's copy time). Errors raise _planner.PlannerError with the
// command line's one-line message; sacplan_torch turns it into
// SacplanError. The GIL is released while planning.
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "sacplan/api/bridge_rules.h"
#include "sacplan/api/commands.h"
#include "sacplan/api/host_memory.h"
#include "sacplan/api/planning.h"
#include "sacplan/planner/memory/host_memory.h"
#include "sacplan/planner/memory/outside_blocks.h"
#include "sacplan/planner/plan_io/json_reader.h"
#include "sacplan/planner/plan_io/plan.h"
#include "sacplan/planner/search/presets.h"

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

void OrRaise(const absl::Status& status) {
  if (!status.ok()) throw PlannerError(std::string(status.message()));
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

// (frontier.json text, summary): `sacplan frontier`. `points` as text, so
// that an int of any size gets the command line's message.
std::pair<std::string, std::string> Frontier(const Source& profile,
                                             const std::string& points_text,
                                             const std::string& semantics,
                                             const std::string& host_budget) {
  const int points = OrRaise(api::ParseFrontierPoints(points_text, "points"));
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
  OrRaise(api::CheckHostFits(plan_host_bytes, available, gpus));
}

// apply_plan's reading of a plan (api::AppliedBlocksJson's text): checked against `profile` as
// `sacplan simulate` checks it when one is given, then against the live
// model's `model_config` (JSON text, api::CheckPlanFitsModel) when given.
std::string AppliedPlan(const Source& plan, const std::optional<Source>& profile,
                        const std::string& model_name,
                        const std::optional<std::string>& model_config) {
  const Plan parsed = OrRaise(api::LoadPlanDocument(ToDocument(plan)));
  std::unique_ptr<api::LoadedProfile> loaded;
  if (profile.has_value()) loaded = OrRaise(api::LoadProfileDocument(ToDocument(*profile)));
  // The profile's checks first, as `sacplan simulate` makes them.
  std::string applied = OrRaise(api::AppliedBlocksJson(parsed, loaded.get(), plan.name));
  if (model_config.has_value()) {
    const nlohmann::json config = OrRaise(json_reader::Parse(*model_config, "model_config"));
    OrRaise(api::CheckPlanFitsModel(parsed, model_name, config));
  }
  return applied;
}

// Measured bytes outside the blocks -> the profile's fixed fields
// (SetOutsideBlockBytes).
std::map<std::string, int64_t> OutsideBlockBytes(const MeasuredOutsideBlocks& measured) {
  FixedMemory fixed;
  SetOutsideBlockBytes(measured, fixed);
  return {{"head_bytes", fixed.head_bytes},
          {"head_fwd_only_bytes", fixed.head_fwd_only_bytes},
          {"head_bwd_only_bytes", fixed.head_bwd_only_bytes},
          {"embedding_bwd_workspace_bytes", fixed.embedding_bwd_workspace_bytes}};
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
  m.def("simulate", &Simulate, nb::arg("profile"), nb::arg("plan"),
        nb::arg("semantics").none(), release);
  m.def("compare", &Compare, nb::arg("profile"), nb::arg("budget"), nb::arg("semantics"),
        nb::arg("host_budget"), release);
  m.def("frontier", &Frontier, nb::arg("profile"), nb::arg("points"), nb::arg("semantics"),
        nb::arg("host_budget"), release);
  m.def("pinned_host_bytes", &sacplan::PinnedHostBytes, nb::arg("bytes"));
  m.def("available_host_bytes", [] { return OrRaise(sacplan::api::AvailableHostBytes()); });
  m.def("check_host_fits", &CheckHostFits, nb::arg("plan_host_bytes"), nb::arg("gpus"));
  m.def("applied_plan", &AppliedPlan, nb::arg("plan"), nb::arg("profile").none(),
        nb::arg("model_name"), nb::arg("model_config").none(), release);
  m.def(
      "check_random_draws",
      [](int index, const std::vector<std::pair<std::string, bool>>& draws) {
        OrRaise(sacplan::api::CheckRandomDraws(index, draws));
      },
      nb::arg("index"), nb::arg("draws"));
  using Measured = sacplan::MeasuredOutsideBlocks;
  nb::class_<Measured>(m, "MeasuredOutsideBlocks")
      .def(nb::init<>())
      .def_rw("head_forward_peak_bytes", &Measured::head_forward_peak_bytes)
      .def_rw("head_backward_peak_bytes", &Measured::head_backward_peak_bytes)
      .def_rw("param_grad_bytes", &Measured::param_grad_bytes)
      .def_rw("output_grad_bytes", &Measured::output_grad_bytes)
      .def_rw("shared_input_grad_bytes", &Measured::shared_input_grad_bytes)
      .def_rw("released_output_bytes", &Measured::released_output_bytes)
      .def_rw("freed_at_forward_end_bytes", &Measured::freed_at_forward_end_bytes)
      .def_rw("embedding_backward_peak_bytes", &Measured::embedding_backward_peak_bytes)
      .def_rw("embedding_grad_bytes", &Measured::embedding_grad_bytes);
  m.def("outside_block_bytes", &OutsideBlockBytes, nb::arg("measured"));
  m.def("compared_preset_names", &sacplan::ComparedPresetNames);
  m.def("copy_setup_us", &sacplan::HostLink::CopySetupUs, nb::arg("copy_ms"), nb::arg("bytes"),
        nb::arg("gbps"));
}
