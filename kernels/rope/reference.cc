#include "rope/reference.h"

#include "absl/strings/str_cat.h"

namespace sacplan::kernels {

absl::Status ValidateRope(const RopeParams& p) {
  const RopeShape& s = p.shape;
  if (s.batch <= 0 || s.seq <= 0 || s.heads <= 0 || s.head_dim <= 0) {
    return absl::InvalidArgumentError("rope: batch, seq, heads and head_dim must be positive");
  }
  if (s.head_dim % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("rope: head_dim ", s.head_dim, " is odd (channels pair up)"));
  }
  if (!p.in || !p.table || !p.out) {
    return absl::InvalidArgumentError("rope: in, table and out are required");
  }
  return absl::OkStatus();
}

absl::Status RopeRotateReference(const RopeParams& p) {
  if (absl::Status s = ValidateRope(p); !s.ok()) return s;
  const RopeShape& s = p.shape;
  if (s.in_dtype != DType::kFloat32 || s.out_dtype != DType::kFloat32) {
    return absl::InvalidArgumentError("rope: the reference takes float32 arrays only");
  }
  const int64_t half = s.head_dim / 2;
  const float* in = static_cast<const float*>(p.in);
  float* out = static_cast<float*>(p.out);
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t t = 0; t < s.seq; ++t) {
      const double* table = p.table + t * half * 2;
      for (int64_t h = 0; h < s.heads; ++h) {
        const int64_t base = ((b * s.seq + t) * s.heads + h) * s.head_dim;
        for (int64_t j = 0; j < half; ++j) {
          const double cos = table[2 * j];
          const double sin = p.inverse ? -table[2 * j + 1] : table[2 * j + 1];
          const double re = in[base + 2 * j], im = in[base + 2 * j + 1];
          out[base + 2 * j] = static_cast<float>(re * cos - im * sin);
          out[base + 2 * j + 1] = static_cast<float>(re * sin + im * cos);
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace sacplan::kernels
