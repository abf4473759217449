// Overflow-checked integer arithmetic for sizes read from users: a product
// of shapes or a sum of byte counts that does not fit int64 is an error
// naming the expression, never a wrapped (small or negative) number.
#ifndef SACPLAN_PLANNER_IR_CHECKED_MATH_H_
#define SACPLAN_PLANNER_IR_CHECKED_MATH_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace sacplan {

// The product of `factors` (all >= 0), or InvalidArgument
// "<what> overflows int64" when it does not fit.
inline absl::StatusOr<int64_t> CheckedProduct(
    std::initializer_list<int64_t> factors, std::string_view what) {
  int64_t product = 1;
  for (int64_t f : factors) {
    if (__builtin_mul_overflow(product, f, &product)) {
      return absl::InvalidArgumentError(
          absl::StrCat(std::string(what), " overflows int64"));
    }
  }
  return product;
}

// `total` += `add`; false (and `total` unchanged) when the sum would
// exceed `limit`. Both operands must be >= 0.
inline bool AddWithin(int64_t add, int64_t limit, int64_t& total) {
  int64_t sum = 0;
  if (__builtin_add_overflow(total, add, &sum) || sum > limit) return false;
  total = sum;
  return true;
}

}  // namespace sacplan

#endif  // SACPLAN_PLANNER_IR_CHECKED_MATH_H_
