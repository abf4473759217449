// SACPLAN_CUDA_RETURN_IF_ERROR (kernels/common/cuda_check.h) and the
// statuses it makes from CUDA and CUPTI
// results. Needs the CUDA and CUPTI libraries, not a GPU: the results are
// fed in directly.
#include "gpu_call.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace sacplan {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// CudaCallStatus as the macro calls it, from a fixed source line.
template <typename Result>
absl::Status GpuCallStatus(Result result, const char* call) {
  return CudaCallStatus(result, call, "launcher.cc", 42);
}

bool OneLine(const absl::Status& s) {
  return std::string(s.message()).find('\n') == std::string::npos;
}

TEST(GpuCallTest, SuccessIsOk) {
  EXPECT_TRUE(GpuCallStatus(cudaSuccess, "cudaFree(0)").ok());
  EXPECT_TRUE(GpuCallStatus(CUPTI_SUCCESS, "cuptiActivityFlushAll(0)").ok());
}

TEST(GpuCallTest, NoDeviceOrDriverIsNoCudaDevice) {
  for (cudaError_t e : {cudaErrorNoDevice, cudaErrorInsufficientDriver}) {
    const absl::Status s = GpuCallStatus(e, "cudaGetDeviceCount(&count)");
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(s.message()), StartsWith("no CUDA device: "));
    EXPECT_THAT(std::string(s.message()), HasSubstr("cudaGetDeviceCount(&count)"));
    EXPECT_TRUE(OneLine(s)) << s;
  }
}

TEST(GpuCallTest, OtherCudaFailuresAreInternalAndNameTheCall) {
  const absl::Status s = GpuCallStatus(cudaErrorIllegalAddress, "cudaDeviceSynchronize()");
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(s.message()), HasSubstr("cudaDeviceSynchronize()"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("cudaErrorIllegalAddress"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("(launcher.cc:42)"));
}

TEST(GpuCallTest, AnotherProfilerAttachedIsOneClearLine) {
  const absl::Status s = GpuCallStatus(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED,
                                       "cuptiSubscribe(&subscriber, ...)");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), StartsWith("CUPTI cannot subscribe: another profiler"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("cuptiSubscribe"));
  EXPECT_TRUE(OneLine(s)) << s;
}

TEST(GpuCallTest, NotPermittedIsAPrecondition) {
  const absl::Status s =
      GpuCallStatus(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES, "cuptiActivityEnable(kind)");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("not permitted"));
}

absl::Status TwoCalls(CUptiResult first, int& reached) {
  SACPLAN_CUDA_RETURN_IF_ERROR(first);
  ++reached;
  SACPLAN_CUDA_RETURN_IF_ERROR(CUPTI_ERROR_INVALID_PARAMETER);
  ++reached;
  return absl::OkStatus();
}

TEST(GpuCallTest, MacroReturnsAtTheFirstFailure) {
  int reached = 0;
  const absl::Status s = TwoCalls(CUPTI_SUCCESS, reached);
  EXPECT_EQ(reached, 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(s.message()), HasSubstr("CUPTI_ERROR_INVALID_PARAMETER"));
  reached = 0;
  EXPECT_FALSE(TwoCalls(CUPTI_ERROR_UNKNOWN, reached).ok());
  EXPECT_EQ(reached, 0);
}

}  // namespace
}  // namespace sacplan
