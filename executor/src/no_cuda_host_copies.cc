// A build whose LibTorch has no CUDA: no CUDA copies (MakeHostCopies says so).
#include "host_copies.h"

namespace sacplan::executor_internal::host_copies_internal {

std::unique_ptr<HostCopies> MakeCudaHostCopies(at::Device, std::shared_ptr<HostBytes>) {
  return nullptr;
}

}  // namespace sacplan::executor_internal::host_copies_internal
