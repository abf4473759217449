// The api tests' profile: testing::ChainModel's `blocks` blocks as a user's
// profile of model "chain", as profile.json text.
#ifndef SACPLAN_TESTS_API_CHAIN_PROFILE_H_
#define SACPLAN_TESTS_API_CHAIN_PROFILE_H_

#include <string>

#include "../planner/test_graphs.h"
#include "sacplan/planner/plan_io/profile.h"

namespace sacplan::testing {

inline std::string ChainProfileText(int blocks) {
  Profile profile;
  profile.source = "user";
  profile.model_name = "chain";
  profile.model = ChainModel(blocks);
  return ProfileToJson(profile).dump();
}

}  // namespace sacplan::testing

#endif  // SACPLAN_TESTS_API_CHAIN_PROFILE_H_
