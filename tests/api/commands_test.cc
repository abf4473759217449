// sacplan/api/commands.h: one call per planning command, from the flags as
// typed to the text printed or written. Errors name the flag as the caller
// spells it, every flag is checked before a file is read, and a document
// gives the same answer as a file or as text.
#include "sacplan/api/commands.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "chain_profile.h"

namespace sacplan::api {
namespace {

Document ChainProfile(int blocks, const std::string& name = "chain.json") {
  return {.name = name, .text = testing::ChainProfileText(blocks)};
}

// A file no test writes: a command that reads it fails naming it.
constexpr const char* kMissingFile = "/nonexistent/sacplan-commands-test.json";

TEST(CommandsTest, APlanSimulatesToItsPredictionUnderItsOwnSemantics) {
  for (const char* semantics : {"sacplan", "torch-sac"}) {
    auto plan = PlanCommand(
        {.profile = ChainProfile(3), .preset = "full", .semantics = semantics, .output = "p"});
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_NE(plan->summary.find("plan: full for chain"), std::string::npos) << plan->summary;
    auto line = SimulateCommand({.profile = ChainProfile(3),
                                 .plan = {.name = "p", .text = plan->plan_json},
                                 .json = true});
    ASSERT_TRUE(line.ok()) << line.status();
    ASSERT_EQ(line->output.find('\n'), line->output.size() - 1) << line->output;
    const nlohmann::json figures = nlohmann::json::parse(line->output);
    EXPECT_EQ(figures["semantics"], semantics);
    EXPECT_TRUE(figures["prediction_holds"].get<bool>());
    const nlohmann::json predicted = nlohmann::json::parse(plan->plan_json)["predicted"];
    EXPECT_EQ(figures["peak_bytes"], predicted["peak_bytes"]);
    auto text = SimulateCommand(
        {.profile = ChainProfile(3), .plan = {.name = "p", .text = plan->plan_json}});
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_EQ(text->output.rfind("simulate: full plan for chain", 0), 0u) << text->output;
  }
}

TEST(CommandsTest, AProfileFileAnswersAsItsText) {
  const Document text = ChainProfile(3);
  const std::string path = ::testing::TempDir() + "/commands_test_profile.json";
  std::ofstream(path) << *text.text;
  const Document file = {.name = path};
  auto from_text = PlanCommand({.profile = text, .budget = "1TB", .output = "p"});
  auto from_file = PlanCommand({.profile = file, .budget = "1TB", .output = "p"});
  ASSERT_TRUE(from_text.ok() && from_file.ok()) << from_text.status() << from_file.status();
  EXPECT_EQ(from_file->plan_json, from_text->plan_json);
  EXPECT_EQ(from_file->summary, from_text->summary);
  auto frontier_text = FrontierCommand({.profile = text, .points = 4});
  auto frontier_file = FrontierCommand({.profile = file, .points = 4});
  ASSERT_TRUE(frontier_text.ok() && frontier_file.ok());
  EXPECT_EQ(frontier_file->frontier_json, frontier_text->frontier_json);
}

TEST(CommandsTest, APlanForAnotherModelIsRefusedByName) {
  auto made = PlanCommand({.profile = ChainProfile(3), .preset = "full", .output = "p"});
  ASSERT_TRUE(made.ok()) << made.status();
  auto simulated = SimulateCommand(
      {.profile = ChainProfile(2), .plan = {.name = "three-plan", .text = made->plan_json}});
  ASSERT_FALSE(simulated.ok());
  EXPECT_EQ(simulated.status().message().rfind("three-plan: ", 0), 0u) << simulated.status();
}

TEST(CommandsTest, CompareListsThePresetsAndTheOptimalPlan) {
  auto table = CompareCommand(
      {.profile = ChainProfile(3), .budget = "1TiB", .semantics = "torch-sac", .host_budget = "0"});
  ASSERT_TRUE(table.ok()) << table.status();
  for (const char* row : {"\nnone ", "\nfull ", "\noptimal "}) {
    EXPECT_NE(table->table.find(row), std::string::npos) << row << "\n" << table->table;
  }
  EXPECT_EQ(table->table.find("\noffload "), std::string::npos) << table->table;
  EXPECT_NE(table->table.find("torch-sac semantics"), std::string::npos);
}

// Each bad flag's error, as the command line and as Python's keywords name
// it. The profile is a file that does not exist: flags come first.
struct BadFlag {
  std::string what;
  std::string command_line;  // the whole message, or how it starts
  std::string keywords;
};

std::string ErrorOf(const BadFlag& bad, FlagNames names) {
  const Document missing = {.name = kMissingFile};
  absl::Status status;
  if (bad.what == "no budget") {
    status = PlanCommand({.profile = missing, .output = "p", .names = names}).status();
  } else if (bad.what == "budget") {
    status = PlanCommand({.profile = missing, .budget = "12XB", .output = "p", .names = names})
                 .status();
  } else if (bad.what == "host budget") {
    status = CompareCommand(
                 {.profile = missing, .budget = "1GB", .host_budget = "lots", .names = names})
                 .status();
  } else if (bad.what == "semantics") {
    status = SimulateCommand(
                 {.profile = missing, .plan = missing, .semantics = "", .names = names})
                 .status();
  } else if (bad.what == "points") {
    status = FrontierCommand({.profile = missing, .points = 1, .names = names}).status();
  }
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << bad.what << ": " << status;
  return std::string(status.message());
}

TEST(CommandsTest, ABadFlagIsNamedAsTheCallerSpellsItBeforeAnyFileIsRead) {
  const BadFlag cases[] = {
      {"no budget", "give --budget (the fastest plan that fits) or --preset NAME",
       "give budget (the fastest plan that fits) or preset"},
      {"budget", "--budget '12XB': ", "budget '12XB': "},
      {"host budget", "--host-budget 'lots': ", "host_budget 'lots': "},
      {"semantics", "--semantics '': expected torch-sac or sacplan",
       "semantics '': expected torch-sac or sacplan"},
      {"points", "--points 1: must be between 2 and 1000", "points 1: must be between 2 and 1000"},
  };
  for (const BadFlag& bad : cases) {
    EXPECT_EQ(ErrorOf(bad, FlagNames::kCommandLine).rfind(bad.command_line, 0), 0u)
        << ErrorOf(bad, FlagNames::kCommandLine);
    EXPECT_EQ(ErrorOf(bad, FlagNames::kKeywords).rfind(bad.keywords, 0), 0u)
        << ErrorOf(bad, FlagNames::kKeywords);
  }
}

TEST(CommandsTest, WithGoodFlagsAMissingProfileIsNamedByItsPath) {
  auto plan = PlanCommand({.profile = {.name = kMissingFile}, .preset = "full", .output = "p"});
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find(kMissingFile), std::string::npos) << plan.status();
  auto bad_text = CompareCommand({.profile = {.name = "my-profile", .text = "{\"schema\": "},
                                  .budget = "1GB"});
  ASSERT_FALSE(bad_text.ok());
  EXPECT_EQ(bad_text.status().message().rfind("my-profile", 0), 0u) << bad_text.status();
}

}  // namespace
}  // namespace sacplan::api
