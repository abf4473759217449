// Least-squares calibration of roofline time laws (Eigen).
#include "sacplan/profiler/calibration.h"

#include <cmath>
#include <limits>
#include <set>
#include <tuple>

#include <Eigen/Dense>

#include "absl/strings/str_cat.h"
#include "sacplan/models/graph_builder.h"

namespace sacplan {
namespace {

// One observation: an op's forward FLOPs and bytes, and a measured time.
struct Row {
  double gflop = 0;
  double gbyte = 0;
  double ms = 0;
  bool operator<(const Row& o) const {
    return std::tie(gflop, gbyte, ms) < std::tie(o.gflop, o.gbyte, o.ms);
  }
};

// Non-negative least squares on relative error for x = (launch_ms,
// ms_per_gflop, ms_per_gbyte): with three unknowns every subset of
// coefficients allowed to be non-zero is tried, each solved unconstrained
// (complete orthogonal decomposition: the minimum-norm answer when the rows
// cannot tell two features apart), and the feasible one with the least
// residual wins. That is exactly the NNLS optimum: the optimum is the
// unconstrained optimum over its own support.
TimeLaw FitLaw(const std::set<Row>& rows) {
  TimeLaw law;
  law.samples = static_cast<int>(rows.size());
  if (rows.empty()) return law;
  const int n = static_cast<int>(rows.size());
  Eigen::MatrixXd a(n, 3);
  Eigen::VectorXd b = Eigen::VectorXd::Ones(n);  // t / t: relative error
  int i = 0;
  for (const Row& r : rows) {
    a.row(i++) << 1.0 / r.ms, r.gflop / r.ms, r.gbyte / r.ms;
  }
  Eigen::Vector3d best = Eigen::Vector3d::Zero();
  double best_residual = std::numeric_limits<double>::infinity();
  for (int support = 1; support < 8; ++support) {
    std::vector<int> columns;
    for (int c = 0; c < 3; ++c) {
      if (support & (1 << c)) columns.push_back(c);
    }
    Eigen::MatrixXd sub(n, static_cast<int>(columns.size()));
    for (size_t k = 0; k < columns.size(); ++k) sub.col(k) = a.col(columns[k]);
    const Eigen::VectorXd x = sub.completeOrthogonalDecomposition().solve(b);
    if ((x.array() < 0).any() || !x.allFinite()) continue;
    const double residual = (sub * x - b).squaredNorm();
    if (residual < best_residual) {
      best_residual = residual;
      best.setZero();
      for (size_t k = 0; k < columns.size(); ++k) best(columns[k]) = x(k);
    }
  }
  law.launch_ms = best(0);
  law.ms_per_gflop = best(1);
  law.ms_per_gbyte = best(2);
  law.rms_relative_error = std::sqrt((a * best - b).squaredNorm() / n);
  return law;
}

}  // namespace

const char* OpClassName(OpClass op_class) {
  switch (op_class) {
    case OpClass::kGemm: return "gemm";
    case OpClass::kAttention: return "attention";
    case OpClass::kMemoryBound: return "memory";
  }
  return "?";
}

double TimeLaw::PredictMs(double flops, double bytes) const {
  return launch_ms + flops / 1e9 * ms_per_gflop + bytes / 1e9 * ms_per_gbyte;
}

absl::StatusOr<RooflineCalibration> CalibrateRoofline(
    const std::vector<MeasuredProfile>& measured) {
  if (measured.empty()) {
    return absl::InvalidArgumentError("calibration: no measured profile to fit");
  }
  std::array<std::set<Row>, kOpClassCount> fwd_rows, bwd_rows;
  RooflineCalibration calibration;
  double head_fwd_ratio = 0, head_bwd_ratio = 0, optimizer_ms_per_byte = 0;
  int heads = 0, optimizers = 0;
  for (size_t p = 0; p < measured.size(); ++p) {
    for (const Block& block : measured[p].model.blocks) {
      for (size_t k = 0; k < block.ops.size(); ++k) {
        const Op& op = block.ops[k];
        // A collective's time is the interconnect's, not a compute law's.
        if (op.collective) continue;
        const std::string where =
            absl::StrCat("calibration profile ", p + 1, " blocks[", block.index, "].ops[", k,
                         "] ('", op.id, "')");
        if (op.flops <= 0 && op.bytes_moved <= 0) {
          return absl::InvalidArgumentError(absl::StrCat(
              where, ": no flops and no bytes_moved; calibration needs a profile that "
                     "carries the graph's costs (sacplan profile --device cpu writes them)"));
        }
        if (!(op.fwd_ms > 0) || !(op.bwd_ms > 0)) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, ": fwd_ms and bwd_ms must be > 0 to calibrate from"));
        }
        const int c = static_cast<int>(KindInfo(op.kind).op_class);
        fwd_rows[c].insert({op.flops / 1e9, op.bytes_moved / 1e9, op.fwd_ms});
        bwd_rows[c].insert({op.flops / 1e9, op.bytes_moved / 1e9, op.bwd_ms});
      }
    }
  }
  for (int c = 0; c < kOpClassCount; ++c) {
    calibration.fwd[c] = FitLaw(fwd_rows[c]);
    calibration.bwd[c] = FitLaw(bwd_rows[c]);
  }
  const TimeLaw& gemm_fwd = calibration.fwd[static_cast<int>(OpClass::kGemm)];
  const TimeLaw& gemm_bwd = calibration.bwd[static_cast<int>(OpClass::kGemm)];
  for (const MeasuredProfile& m : measured) {
    const FixedMemory& fixed = m.model.fixed;
    ModelConfig rank = m.config;  // a rank's head sees its own tokens
    rank.tokens /= m.model.parallel.sp;
    const NonBlockCost cost = NonBlockCostOf(rank);
    const double fwd_law = gemm_fwd.PredictMs(cost.fwd_flops, cost.fwd_bytes_moved);
    const double bwd_law = gemm_bwd.PredictMs(cost.fwd_flops, cost.fwd_bytes_moved);
    if (fixed.head_fwd_ms > 0 && fixed.head_bwd_ms > 0 && fwd_law > 0 && bwd_law > 0) {
      head_fwd_ratio += fixed.head_fwd_ms / fwd_law;
      head_bwd_ratio += fixed.head_bwd_ms / bwd_law;
      ++heads;
    }
    if (fixed.optimizer_ms > 0 && fixed.param_bytes > 0) {
      optimizer_ms_per_byte += fixed.optimizer_ms / static_cast<double>(fixed.param_bytes);
      ++optimizers;
    }
  }
  if (heads > 0) {
    calibration.head_fwd_scale = head_fwd_ratio / heads;
    calibration.head_bwd_scale = head_bwd_ratio / heads;
  }
  if (optimizers > 0) {
    calibration.optimizer_ms_per_param_byte = optimizer_ms_per_byte / optimizers;
  }
  return calibration;
}

absl::StatusOr<MeasuredProfile> MeasuredFromProfile(const Profile& profile,
                                                    const std::string& what) {
  if (!profile.model_config.is_object() || !profile.model_config.contains("name")) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": model.config: missing; calibration needs the config the profile was "
              "measured at"));
  }
  const nlohmann::json& name = profile.model_config["name"];
  if (!name.is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": model.config.name: expected a string"));
  }
  absl::StatusOr<ModelConfig> config = ModelConfigByName(name.get<std::string>());
  if (!config.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": model.config.name: ", config.status().message()));
  }
  if (absl::Status applied = ApplyOverrides(profile.model_config, *config); !applied.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": model.config: ", applied.message()));
  }
  return MeasuredProfile{profile.model, *std::move(config)};
}

void ApplyCalibration(const RooflineCalibration& calibration, const ModelConfig& config,
                      Model& model) {
  for (Block& block : model.blocks) {
    for (Op& op : block.ops) {
      if (op.collective) continue;  // keeps the roofline's interconnect time
      const int c = static_cast<int>(KindInfo(op.kind).op_class);
      if (calibration.fwd[c].samples > 0) {
        op.fwd_ms = calibration.fwd[c].PredictMs(op.flops, op.bytes_moved);
      }
      if (calibration.bwd[c].samples > 0) {
        op.bwd_ms = calibration.bwd[c].PredictMs(op.flops, op.bytes_moved);
      }
    }
  }
  FixedMemory& fixed = model.fixed;
  // The head and the embeddings see this rank's tokens.
  ModelConfig rank = config;
  rank.tokens /= model.parallel.sp;
  const NonBlockCost cost = NonBlockCostOf(rank);
  const int gemm = static_cast<int>(OpClass::kGemm);
  if (calibration.head_fwd_scale > 0 && calibration.fwd[gemm].samples > 0) {
    fixed.head_fwd_ms = calibration.head_fwd_scale *
                        calibration.fwd[gemm].PredictMs(cost.fwd_flops, cost.fwd_bytes_moved);
    fixed.head_bwd_ms = calibration.head_bwd_scale *
                        calibration.bwd[gemm].PredictMs(cost.fwd_flops, cost.fwd_bytes_moved);
  }
  if (calibration.optimizer_ms_per_param_byte > 0) {
    fixed.optimizer_ms =
        calibration.optimizer_ms_per_param_byte * static_cast<double>(fixed.param_bytes);
  }
}

}  // namespace sacplan
