// Element types the fused kernels read and write, as a runtime tag so that
// host code without CUDA headers (references, LibTorch wrappers) can name
// them.
#ifndef SACPLAN_KERNELS_COMMON_DTYPE_H_
#define SACPLAN_KERNELS_COMMON_DTYPE_H_

namespace sacplan::kernels {

// Storage type of a tensor argument. Arithmetic is always fp32: a bf16 value
// is widened on load and rounded to nearest-even on store.
enum class DType { kFloat32, kBFloat16 };

// "float32" / "bfloat16".
const char* DTypeName(DType dtype);

}  // namespace sacplan::kernels

#endif  // SACPLAN_KERNELS_COMMON_DTYPE_H_
