#include "common/dtype.h"

namespace sacplan::kernels {

const char* DTypeName(DType dtype) {
  return dtype == DType::kBFloat16 ? "bfloat16" : "float32";
}

}  // namespace sacplan::kernels
