#include "sacplan/planner/plan_io/profile.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "test_graphs.h"

namespace sacplan {
namespace {

Profile ChainProfile() {
  Profile profile;
  profile.source = "user";
  profile.model_name = "chain";
  profile.model = testing::ChainModel(2);
  return profile;
}

TEST(ProfileTest, EmbeddingSavedBytesRoundTripsAndDefaultsToZero) {
  Profile profile = ChainProfile();
  profile.model.fixed.embedding_saved_bytes = 4096;
  nlohmann::json doc = ProfileToJson(profile);
  EXPECT_EQ(doc["fixed"]["embedding_saved_bytes"], 4096);
  auto read = ProfileFromJson(doc);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->model.fixed.embedding_saved_bytes, 4096);

  doc["fixed"].erase("embedding_saved_bytes");
  read = ProfileFromJson(doc);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->model.fixed.embedding_saved_bytes, 0);
}

TEST(ProfileTest, HostLinkRoundTripsAndIsLeftOutWithoutOne) {
  Profile profile = ChainProfile();
  nlohmann::json doc = ProfileToJson(profile);
  EXPECT_FALSE(doc["device"].contains("host_link"));
  profile.model.host_link = {50, 40, 256'000'000'000};
  doc = ProfileToJson(profile);
  EXPECT_EQ(doc["device"]["host_link"]["d2h_gbps"], 50);
  auto read = ProfileFromJson(doc);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->model.host_link.d2h_gbps, 50);
  EXPECT_EQ(read->model.host_link.h2d_gbps, 40);
  EXPECT_EQ(read->model.host_link.host_memory_bytes, 256'000'000'000);
  EXPECT_TRUE(read->model.host_link.available());
}

TEST(ProfileTest, HostLinkPerCopyCostsRoundTripAndAreLeftOutAtZero) {
  Profile profile = ChainProfile();
  profile.model.host_link = {50, 40, 1000};
  nlohmann::json doc = ProfileToJson(profile);
  EXPECT_FALSE(doc["device"]["host_link"].contains("copy_setup_us"));
  EXPECT_FALSE(doc["device"]["host_link"].contains("offload_host_us"));
  profile.model.host_link.offload_host_us = 35;
  profile.model.host_link.fetch_host_us = 20;
  profile.model.host_link.copy_setup_us = 8;
  doc = ProfileToJson(profile);
  EXPECT_EQ(doc["device"]["host_link"]["offload_host_us"], 35);
  auto read = ProfileFromJson(doc);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->model.host_link.offload_host_us, 35);
  EXPECT_EQ(read->model.host_link.fetch_host_us, 20);
  EXPECT_EQ(read->model.host_link.copy_setup_us, 8);
  for (const char* key : {"offload_host_us", "fetch_host_us", "copy_setup_us"}) {
    nlohmann::json bad = doc;
    bad["device"]["host_link"][key] = -1;
    read = ProfileFromJson(bad);
    ASSERT_FALSE(read.ok()) << key;
    EXPECT_NE(read.status().message().find(std::string("device.host_link.") + key),
              std::string::npos)
        << read.status().message();
  }
  // Set in code (not read from JSON): Validate refuses them too.
  profile.model.host_link.copy_setup_us = -1;
  EXPECT_FALSE(ValidateModel(profile.model).ok());
}

TEST(ProfileTest, RejectsAHostLinkOneWayOrNegative) {
  Profile profile = ChainProfile();
  profile.model.host_link = {50, 50, 1000};
  nlohmann::json doc = ProfileToJson(profile);
  doc["device"]["host_link"]["h2d_gbps"] = 0;
  auto read = ProfileFromJson(doc);
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("device.host_link"), std::string::npos)
      << read.status().message();
  doc["device"]["host_link"]["h2d_gbps"] = -3;
  read = ProfileFromJson(doc);
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("device.host_link.h2d_gbps"), std::string::npos)
      << read.status().message();
  doc["device"]["host_link"].erase("h2d_gbps");
  read = ProfileFromJson(doc);
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("device.host_link.h2d_gbps"), std::string::npos)
      << read.status().message();
}

TEST(ProfileTest, RejectsABadEmbeddingSavedBytes) {
  nlohmann::json doc = ProfileToJson(ChainProfile());
  doc["fixed"]["embedding_saved_bytes"] = -1;
  auto read = ProfileFromJson(doc);
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("fixed"), std::string::npos);

  doc["fixed"]["embedding_saved_bytes"] = "lots";
  read = ProfileFromJson(doc);
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("fixed.embedding_saved_bytes"),
            std::string::npos)
      << read.status().message();
}

TEST(ProfileTest, KernelsRoundTripsDefaultsToAtenAndRejectsOthers) {
  Profile profile = ChainProfile();
  profile.kernels = "fused";
  nlohmann::json doc = ProfileToJson(profile);
  EXPECT_EQ(doc["kernels"], "fused");
  auto read = ProfileFromJson(doc);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->kernels, "fused");

  doc.erase("kernels");
  read = ProfileFromJson(doc);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->kernels, "aten");

  doc["kernels"] = "triton";
  read = ProfileFromJson(doc);
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("kernels"), std::string::npos)
      << read.status().message();
}

TEST(ProfileTest, ByteCountsWhoseSumExceedsTwoToThe62AreRejected) {
  // Each byte count is within its own limit (2^53); 600 of them are not
  // within int64 once a step adds them up.
  Model model = testing::ChainModel(600);
  for (Block& block : model.blocks) {
    for (Op& op : block.ops) op.workspace_bytes = int64_t{1} << 53;
  }
  const absl::Status s = ValidateModel(model);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("more than 2^62 bytes"), std::string::npos) << s;
  for (Block& block : model.blocks) {
    for (Op& op : block.ops) op.workspace_bytes = int64_t{1} << 40;
  }
  EXPECT_TRUE(ValidateModel(model).ok());
}

TEST(ProfileTest, NonFiniteTimesAreRejectedEvenWhenNaN) {
  Model model = testing::ChainModel(2);
  model.blocks[1].ops[0].fwd_ms = std::numeric_limits<double>::quiet_NaN();
  EXPECT_FALSE(ValidateModel(model).ok());
  model.blocks[1].ops[0].fwd_ms = 1;
  model.fixed.optimizer_ms = std::numeric_limits<double>::infinity();
  EXPECT_FALSE(ValidateModel(model).ok());
}

TEST(ProfileTest, MeasurementRoundTripsAndIsLeftOutWhenEmpty) {
  Profile profile = ChainProfile();
  EXPECT_FALSE(ProfileToJson(profile).contains("measurement"));
  profile.measurement = {{"timer", "cupti"}, {"dropped_records", 12}};
  const nlohmann::json doc = ProfileToJson(profile);
  EXPECT_EQ(doc["measurement"]["dropped_records"], 12);
  auto read = ProfileFromJson(doc);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->measurement, profile.measurement);
}

TEST(ProfileTest, RejectsAMeasurementThatIsNotAnObject) {
  nlohmann::json doc = ProfileToJson(ChainProfile());
  doc["measurement"] = 3;
  auto read = ProfileFromJson(doc);
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("measurement"), std::string::npos)
      << read.status().message();
}

TEST(ProfileTest, HostTimesRoundTripAndAreLeftOutWithoutThem) {
  Profile profile = ChainProfile();
  nlohmann::json doc = ProfileToJson(profile);
  EXPECT_FALSE(doc["blocks"][0]["ops"][0].contains("host"));
  EXPECT_FALSE(doc["blocks"][0]["ops"][0].contains("syncs"));
  EXPECT_FALSE(doc["fixed"].contains("host"));
  Op& fc = profile.model.blocks[0].ops[0];
  fc.host.fwd_ms = 0.75;
  fc.host.recompute_ms = 1.25;
  fc.host.replay_ms = 0;  // given as 0: kept as given
  profile.model.blocks[1].ops[1].syncs = true;
  profile.model.fixed.host = {0.5, 0.25, 2};
  doc = ProfileToJson(profile);
  EXPECT_EQ(doc["blocks"][0]["ops"][0]["host"].size(), 3u);
  EXPECT_EQ(doc["blocks"][1]["ops"][1]["syncs"], true);
  auto read = ProfileFromJson(doc);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->model.blocks[0].ops[0].host, fc.host);
  EXPECT_FALSE(read->model.blocks[0].ops[0].host.bwd_ms.has_value());
  EXPECT_TRUE(read->model.blocks[1].ops[1].syncs);
  EXPECT_FALSE(read->model.blocks[1].ops[0].syncs);
  EXPECT_EQ(read->model.fixed.host, profile.model.fixed.host);
  EXPECT_EQ(ProfileToJson(*read), doc);
  // Blocks that differ only in host times or syncs are not the same block.
  EXPECT_FALSE(SameStructure(read->model.blocks[0], read->model.blocks[1]));
  EXPECT_TRUE(SameMemoryStructure(read->model.blocks[0], read->model.blocks[1]));
}

TEST(ProfileTest, HostTimesDefaultAsTheSpecSays) {
  OpHostTimes host;
  host.fwd_ms = 2;
  host.bwd_ms = 3;
  ResolvedHostTimes r = Resolve(host);
  EXPECT_EQ(r.checkpointed_fwd_ms, 2);
  EXPECT_EQ(r.saved_fwd_ms, 2);
  EXPECT_EQ(r.checkpointed_bwd_ms, 3);
  EXPECT_EQ(r.recompute_ms, 2);
  EXPECT_EQ(r.replay_ms, 0);
  host.checkpointed_fwd_ms = 5;
  r = Resolve(host);
  EXPECT_EQ(r.saved_fwd_ms, 5);  // saved follows checkpointed
  EXPECT_EQ(r.recompute_ms, 2);  // recompute follows fwd
  r = Resolve(OpHostTimes());
  EXPECT_EQ(r.fwd_ms + r.bwd_ms + r.saved_fwd_ms + r.recompute_ms, 0);
}

TEST(ProfileTest, RefusesMalformedHostTimesNamingTheField) {
  const nlohmann::json good = ProfileToJson(ChainProfile());
  struct Case {
    const char* pointer;  // where the bad value goes
    nlohmann::json value;
    const char* says;
  };
  const Case cases[] = {
      {"/blocks/1/ops/2/host/fwd_ms", -1, "blocks[1].ops[2].host.fwd_ms"},
      {"/blocks/0/ops/0/host/replay_ms", "fast", "blocks[0].ops[0].host.replay_ms"},
      {"/blocks/0/ops/0/host", 3, "blocks[0].ops[0].host"},
      {"/blocks/0/ops/1/syncs", "yes", "blocks[0].ops[1].syncs"},
      {"/fixed/host/optimizer_ms", -0.5, "fixed.host.optimizer_ms"},
      {"/fixed/host/head_fwd_ms", "1", "fixed.host.head_fwd_ms"},
  };
  for (const Case& c : cases) {
    nlohmann::json doc = good;
    doc[nlohmann::json::json_pointer(c.pointer)] = c.value;
    const auto read = ProfileFromJson(doc);
    ASSERT_FALSE(read.ok()) << c.pointer;
    EXPECT_NE(read.status().message().find(c.says), std::string::npos) << read.status();
  }
  // A model built in code is checked too.
  Model model = testing::ChainModel(2);
  model.blocks[1].ops[2].host.bwd_ms = std::numeric_limits<double>::quiet_NaN();
  const absl::Status status = ValidateModel(model);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("blocks[1].ops[2].host.bwd_ms"), std::string::npos) << status;
  model.blocks[1].ops[2].host.bwd_ms = 0;
  model.fixed.host.head_bwd_ms = -1;
  EXPECT_NE(ValidateModel(model).message().find("fixed.host.head_bwd_ms"), std::string::npos);
}

}  // namespace
}  // namespace sacplan
