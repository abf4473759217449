// The many-GPU fields of profile.json: parallel and per-block fsdp.
#include "sacplan/planner/ir/parallel.h"

#include <gtest/gtest.h>

#include <string>

#include "sacplan/planner/plan_io/profile.h"
#include "test_graphs.h"

namespace sacplan {
namespace {

Profile FsdpProfile() {
  Profile profile;
  profile.model_name = "chain";
  profile.model = testing::ChainModel(2);
  profile.model.parallel = {4, true, 2};
  for (Block& block : profile.model.blocks) {
    block.fsdp = {800, 200, 800, 0.5, 0.25, 800, 16};
  }
  return profile;
}

std::string ErrorOf(const nlohmann::json& doc) {
  auto read = ProfileFromJson(doc);
  return read.ok() ? "" : std::string(read.status().message());
}

TEST(ParallelTest, AbsentMeansOneRankAndASingleRankProfileWritesNoField) {
  Profile profile;
  profile.model_name = "chain";
  profile.model = testing::ChainModel(2);
  const nlohmann::json doc = ProfileToJson(profile);
  EXPECT_FALSE(doc.contains("parallel"));
  EXPECT_FALSE(doc["blocks"][0].contains("fsdp"));
  auto read = ProfileFromJson(doc);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->model.parallel.world_size, 1);
  EXPECT_FALSE(read->model.parallel.fsdp);
  EXPECT_EQ(read->model.parallel.sp, 1);
}

TEST(ParallelTest, ParallelAndBlockFsdpRoundTrip) {
  const nlohmann::json doc = ProfileToJson(FsdpProfile());
  EXPECT_EQ(doc["parallel"]["world_size"], 4);
  EXPECT_EQ(doc["parallel"]["fsdp"], true);
  EXPECT_EQ(doc["parallel"]["sp"], 2);
  auto read = ProfileFromJson(doc);
  ASSERT_TRUE(read.ok()) << read.status();
  const BlockFsdp& f = read->model.blocks[1].fsdp;
  EXPECT_EQ(f.unsharded_param_bytes, 800);
  EXPECT_EQ(f.sharded_grad_bytes, 200);
  EXPECT_EQ(f.reduce_scatter_bytes, 800);
  EXPECT_DOUBLE_EQ(f.all_gather_ms, 0.5);
  EXPECT_DOUBLE_EQ(f.reduce_scatter_ms, 0.25);
  EXPECT_EQ(f.all_gather_workspace_bytes, 800);
  EXPECT_EQ(f.reduce_scatter_workspace_bytes, 16);
  // The scratch fields are optional (a NCCL capture has none).
  nlohmann::json without = doc;
  without["blocks"][0]["fsdp"].erase("all_gather_workspace_bytes");
  auto read_without = ProfileFromJson(without);
  ASSERT_TRUE(read_without.ok()) << read_without.status();
  EXPECT_EQ(read_without->model.blocks[0].fsdp.all_gather_workspace_bytes, 0);
  EXPECT_EQ(read->model.parallel.world_size, 4);
  EXPECT_EQ(read->model.parallel.sp, 2);
}

TEST(ParallelTest, ParallelRulesAreOneLineErrorsNamingTheField) {
  const nlohmann::json good = ProfileToJson(FsdpProfile());
  auto with = [&](const char* key, nlohmann::json value) {
    nlohmann::json doc = good;
    doc["parallel"][key] = std::move(value);
    return ErrorOf(doc);
  };
  EXPECT_EQ(with("world_size", 0).rfind("parallel.world_size", 0), 0u) << with("world_size", 0);
  EXPECT_EQ(with("world_size", 2.5).rfind("parallel.world_size", 0), 0u);
  EXPECT_EQ(with("sp", 8).rfind("parallel.sp", 0), 0u) << with("sp", 8);  // > world size
  EXPECT_EQ(with("sp", 3).rfind("parallel.sp", 0), 0u);  // does not divide 4
  EXPECT_EQ(with("fsdp", "yes").rfind("parallel.fsdp", 0), 0u);
  nlohmann::json one_rank = good;
  one_rank["parallel"] = {{"world_size", 1}, {"fsdp", true}};
  EXPECT_EQ(ErrorOf(one_rank).rfind("parallel.fsdp", 0), 0u) << ErrorOf(one_rank);
  for (const std::string& message : {with("sp", 8), ErrorOf(one_rank)}) {
    EXPECT_EQ(message.find('\n'), std::string::npos);
  }
}

TEST(ParallelTest, BlockFsdpIsRequiredExactlyUnderFsdp) {
  nlohmann::json doc = ProfileToJson(FsdpProfile());
  doc["blocks"][1].erase("fsdp");
  EXPECT_EQ(ErrorOf(doc).rfind("blocks[1].fsdp: missing", 0), 0u) << ErrorOf(doc);

  doc = ProfileToJson(FsdpProfile());
  doc["parallel"]["fsdp"] = false;
  EXPECT_EQ(ErrorOf(doc).rfind("blocks[0].fsdp: present", 0), 0u) << ErrorOf(doc);

  doc = ProfileToJson(FsdpProfile());
  doc["blocks"][0]["fsdp"]["unsharded_param_bytes"] = 0;
  EXPECT_EQ(ErrorOf(doc).rfind("blocks[0].fsdp.unsharded_param_bytes", 0), 0u);
  doc = ProfileToJson(FsdpProfile());
  doc["blocks"][0]["fsdp"]["sharded_grad_bytes"] = -4;
  EXPECT_EQ(ErrorOf(doc).rfind("blocks[0].fsdp.sharded_grad_bytes", 0), 0u);
  doc = ProfileToJson(FsdpProfile());
  doc["blocks"][0]["fsdp"]["all_gather_ms"] = -1;
  EXPECT_EQ(ErrorOf(doc).rfind("blocks[0].fsdp.all_gather_ms", 0), 0u);
}

TEST(ParallelTest, RootParamBytesRoundTripAndNeedFsdp) {
  Profile profile = FsdpProfile();
  profile.model.fixed.fsdp_root_param_bytes = 3344;
  nlohmann::json doc = ProfileToJson(profile);
  EXPECT_EQ(doc["fixed"]["fsdp_root_param_bytes"], 3344);
  auto read = ProfileFromJson(doc);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->model.fixed.fsdp_root_param_bytes, 3344);
  doc.erase("parallel");
  for (auto& block : doc["blocks"]) block.erase("fsdp");
  EXPECT_EQ(ErrorOf(doc).rfind("fixed.fsdp_root_param_bytes", 0), 0u) << ErrorOf(doc);
  EXPECT_FALSE(ProfileToJson(Profile{}).at("fixed").contains("fsdp_root_param_bytes"));
}

TEST(ParallelTest, ValidateModelChecksTheConfigBuiltInCode) {
  Model model = testing::ChainModel(2);
  model.parallel = {8, false, 16};
  EXPECT_FALSE(ValidateModel(model).ok());
  model.parallel = {8, true, 8};  // fsdp without the blocks' fields
  const absl::Status status = ValidateModel(model);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("unsharded_param_bytes"), std::string::npos);
}

}  // namespace
}  // namespace sacplan
