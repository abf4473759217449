#include "sacplan/planner/ir/op_kinds.h"

#include <array>

namespace sacplan {
namespace {

constexpr OpKindInfo kKinds[] = {
#define SACPLAN_OP_KIND(constant, name, op_class, grad_flow, collective) \
  {name, OpClass::op_class, GradFlow::grad_flow, collective},
#include "sacplan/planner/ir/op_kinds.inc"
#undef SACPLAN_OP_KIND
};

struct DtypeRow {
  Dtype dtype;
  const char* name;
  int64_t bytes;
};

constexpr std::array<DtypeRow, 5> kDtypes = {{
    {Dtype::kFloat32, dtype_name::kFloat32, 4},
    {Dtype::kBFloat16, dtype_name::kBFloat16, 2},
    {Dtype::kFloat16, dtype_name::kFloat16, 2},
    {Dtype::kFloat64, dtype_name::kFloat64, 8},
    {Dtype::kComplex128, dtype_name::kComplex128, 16},
}};

}  // namespace

OpKindInfo KindInfo(std::string_view kind) {
  for (const OpKindInfo& info : kKinds) {
    if (info.name == kind) return info;
  }
  return OpKindInfo{kind};
}

std::optional<Dtype> ParseDtype(std::string_view name) {
  for (const DtypeRow& row : kDtypes) {
    if (row.name == name) return row.dtype;
  }
  return std::nullopt;
}

const char* DtypeName(Dtype dtype) {
  for (const DtypeRow& row : kDtypes) {
    if (row.dtype == dtype) return row.name;
  }
  return "";
}

int64_t DtypeBytes(std::string_view name) {
  for (const DtypeRow& row : kDtypes) {
    if (row.name == name) return row.bytes;
  }
  return 0;
}

}  // namespace sacplan
