// Lookups shared by the model and profiler tests.
#ifndef SACPLAN_TESTS_SUPPORT_MODEL_LOOKUP_H_
#define SACPLAN_TESTS_SUPPORT_MODEL_LOOKUP_H_

#include <gtest/gtest.h>

#include <string>

#include "sacplan/models/model_config.h"
#include "sacplan/planner/ir/graph.h"

namespace sacplan::testing {

// A built-in config; the name must exist.
inline ModelConfig Config(const std::string& name) {
  return *ModelConfigByName(name);
}

// The op with `id`; a test failure (and an empty op) when there is none.
inline const Op& FindOp(const Block& block, const std::string& id) {
  for (const Op& op : block.ops) {
    if (op.id == id) return op;
  }
  ADD_FAILURE() << "no op " << id;
  static const Op none;
  return none;
}

}  // namespace sacplan::testing

#endif  // SACPLAN_TESTS_SUPPORT_MODEL_LOOKUP_H_
