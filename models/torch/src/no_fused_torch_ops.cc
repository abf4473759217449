// Builds without the CUDA kernels (SACPLAN_WITH_CUDA=OFF): every op runs
// ATen (CreateTorchModel refuses --kernels fused before asking).
#include "torch_ops.h"

namespace sacplan {

bool FusedKernelsBuilt() { return false; }

namespace torch_internal {

std::unique_ptr<TorchOp> MakeFusedOp(const OpSpec&) { return nullptr; }

}  // namespace torch_internal
}  // namespace sacplan
