#include "sacplan/planner/profile.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace sacplan
