// Return-on-error helpers for code that speaks absl::Status/StatusOr, the
// one error type at sacplan's module boundaries (docs/STYLE: "one error
// type"). Public so that a C++ trainer built on sacplan can use them too.
//
//   RETURN_IF_ERROR(expr);          // expr: absl::Status. Returns it from the
//                                   // enclosing function unless it is OK.
//   ASSIGN_OR_RETURN(lhs, expr);    // expr: absl::StatusOr<T>. Returns its
//                                   // status unless OK, else moves the value
//                                   // into lhs (a declaration such as
//                                   // `auto x` or an existing variable).
//
// The enclosing function must return absl::Status or absl::StatusOr<U>.
// Both macros evaluate `expr` exactly once. ASSIGN_OR_RETURN declares a
// temporary named after the line it is on, so several may share a scope
// (but not one line); lhs must not contain unparenthesised commas.
#ifndef SACPLAN_STATUS_MACROS_H_
#define SACPLAN_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define RETURN_IF_ERROR(expr)                                        \
  do {                                                               \
    if (::absl::Status sacplan_status_ = (expr); !sacplan_status_.ok()) \
      return sacplan_status_;                                        \
  } while (false)

#define SACPLAN_STATUS_CONCAT_INNER_(a, b) a##b
#define SACPLAN_STATUS_CONCAT_(a, b) SACPLAN_STATUS_CONCAT_INNER_(a, b)

#define ASSIGN_OR_RETURN(lhs, expr)                                              \
  SACPLAN_ASSIGN_OR_RETURN_IMPL_(                                                \
      SACPLAN_STATUS_CONCAT_(sacplan_statusor_, __LINE__), lhs, expr)

#define SACPLAN_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                   \
  if (!statusor.ok()) return std::move(statusor).status();  \
  lhs = *std::move(statusor)

#endif  // SACPLAN_STATUS_MACROS_H_
