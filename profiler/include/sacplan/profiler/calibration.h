// Least-squares calibration of the roofline from measured profiles, so that
// a profile measured at a short sequence predicts the op times of a long one.
//
// Per op class (GEMM, attention, memory-bound) and direction, an op's time
// is modelled as
//   t_ms = launch_ms + flops * ms_per_gflop / 1e9 + bytes * ms_per_gbyte / 1e9
// with the op's *forward* FLOPs and bytes moved as the features of both its
// forward and its backward time (a backward's work is a fixed multiple of its
// forward's, which the backward coefficients absorb). The compute and memory
// terms are added, not max'ed as in ApplyRoofline: on a CPU they barely
// overlap, and the sum keeps the fit linear. The three coefficients are
// fitted by non-negative least squares on relative error (each row weighted
// by 1 / measured time, so that microsecond ops count as much as second-long
// GEMMs) with Eigen. Format and CLI: docs/profile_format.md, docs/cli.md.
#ifndef SACPLAN_PROFILER_CALIBRATION_H_
#define SACPLAN_PROFILER_CALIBRATION_H_

#include <array>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sacplan/models/model_config.h"
#include "sacplan/planner/ir/graph.h"
#include "sacplan/planner/ir/op_kinds.h"
#include "sacplan/planner/plan_io/profile.h"

namespace sacplan {

// Ops fall into the classes of their kind's row (sacplan/planner/ir/op_kinds.h).
const char* OpClassName(OpClass op_class);  // "gemm", "attention", "memory"

// One fitted time law. All coefficients are >= 0.
struct TimeLaw {
  double launch_ms = 0;     // fixed cost per call
  double ms_per_gflop = 0;  // 1 / achieved GFLOP per ms (= TFLOP/s)
  double ms_per_gbyte = 0;  // 1 / achieved GB per ms (= TB/s)
  int samples = 0;          // rows fitted (0: not calibrated)
  // Root-mean-square relative error of the fit over its rows.
  double rms_relative_error = 0;

  double PredictMs(double flops, double bytes) const;
};

struct RooflineCalibration {
  std::array<TimeLaw, kOpClassCount> fwd;  // indexed by OpClass
  std::array<TimeLaw, kOpClassCount> bwd;
  // The head (embeddings, head, loss): measured time over what the GEMM law
  // predicts for its FLOPs and bytes, averaged over the measured profiles;
  // 0 when no profile gave a head time.
  double head_fwd_scale = 0;
  double head_bwd_scale = 0;
  // The optimizer step: measured milliseconds per byte of parameters (one
  // pass over parameters and state); 0 when unknown.
  double optimizer_ms_per_param_byte = 0;
};

// One measured profile and the config it was measured at (whose non-block
// FLOPs and bytes the head's scale needs).
struct MeasuredProfile {
  Model model;
  ModelConfig config;
};

// Fits the laws from every op of every measured profile (blocks of one
// structure count once: identical rows add nothing). A class with no op in
// any profile keeps samples == 0. InvalidArgument when there is nothing to
// fit, or when an op has no FLOPs and no bytes (a profile without the
// graph's costs, e.g. hand-written) or a non-positive time.
absl::StatusOr<RooflineCalibration> CalibrateRoofline(
    const std::vector<MeasuredProfile>& measured);

// A measured profile.json's model and config (config rebuilt from its echoed
// model.config). InvalidArgument naming `what` when the config is missing or
// not a valid config.
absl::StatusOr<MeasuredProfile> MeasuredFromProfile(const Profile& profile,
                                                    const std::string& what);

// Sets every op's fwd_ms / bwd_ms from the fitted law of its class (ops of a
// class with no samples keep their times; collectives keep theirs, which are
// the interconnect's and are never fitted), and the head and optimizer times
// from their scales when known, using `config`'s non-block costs at the
// model's tokens per rank (tokens / parallel.sp).
void ApplyCalibration(const RooflineCalibration& calibration, const ModelConfig& config,
                      Model& model);

}  // namespace sacplan

#endif  // SACPLAN_PROFILER_CALIBRATION_H_
