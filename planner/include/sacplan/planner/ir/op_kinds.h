// Op kinds and dtypes: the one table of each that the planner, models,
// profiler and executor read (and that python/tests/test_op_kinds.py checks
// sacplan_torch against), so that no layer keeps its own list of names.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace sacplan {

// Which calibrated time law an op follows (profiler/calibration.h).
enum class OpClass { kGemm, kAttention, kMemoryBound };
inline constexpr int kOpClassCount = 3;

// What an op's backward does with its output's gradient.
enum class GradFlow { kOwn, kPassesThrough, kSplits };

struct OpKindInfo {
  std::string_view name;
  OpClass op_class = OpClass::kMemoryBound;
  GradFlow grad_flow = GradFlow::kOwn;
  bool collective = false;
};

namespace op_kind {
#define SACPLAN_OP_KIND(constant, name, op_class, grad_flow, collective) \
  inline constexpr char constant[] = name;
#include "sacplan/planner/ir/op_kinds.inc"
#undef SACPLAN_OP_KIND
}  // namespace op_kind

// The row of `kind`. A kind outside the table (sacplan_torch names ops it
// has no row for by their aten name) is memory-bound, makes its own
// gradients and is no collective.
OpKindInfo KindInfo(std::string_view kind);

enum class Dtype { kFloat32, kBFloat16, kFloat16, kFloat64, kComplex128 };

namespace dtype_name {
inline constexpr char kFloat32[] = "float32";
inline constexpr char kBFloat16[] = "bfloat16";
inline constexpr char kFloat16[] = "float16";
inline constexpr char kFloat64[] = "float64";
inline constexpr char kComplex128[] = "complex128";
}  // namespace dtype_name

// The dtype named `name` ("bfloat16", "float32", ...; docs/profile_format.md).
std::optional<Dtype> ParseDtype(std::string_view name);
const char* DtypeName(Dtype dtype);
// Bytes per element of `name`; 0 for a dtype outside the table.
int64_t DtypeBytes(std::string_view name);

}  // namespace sacplan
