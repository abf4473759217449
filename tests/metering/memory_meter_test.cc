// The memory meters: the counting CPU allocator's exact byte counts, its
// peak and reset, per-label attribution, intra-op threads; the CUDA meter
// without a GPU.
#include "sacplan/metering/memory_meter.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace sacplan {
namespace {

MemoryMeter& CpuMeter() {
  static std::unique_ptr<MemoryMeter> meter = [] {
    absl::StatusOr<std::unique_ptr<MemoryMeter>> created =
        CreateMemoryMeter(at::Device(at::kCPU));
    EXPECT_TRUE(created.ok()) << created.status();
    return *std::move(created);
  }();
  return *meter;
}

TEST(CpuMemoryMeterTest, InstallIsIdempotent) {
  CpuMeter();
  EXPECT_TRUE(CountingCpuAllocatorInstalled());
  EXPECT_TRUE(InstallCountingCpuAllocator().ok());
  absl::StatusOr<std::unique_ptr<MemoryMeter>> second =
      CreateMemoryMeter(at::Device(at::kCPU));
  ASSERT_TRUE(second.ok());
  EXPECT_EQ((*second)->Read().allocated_bytes, CpuMeter().Read().allocated_bytes);
}

#if defined(__GLIBC__)
// Once installed, an activation-sized tensor comes from the heap rather
// than a fresh mapping, and freeing it keeps the memory in the process, as
// the CUDA caching allocator keeps its segments.
TEST(CpuMemoryMeterTest, KeepsFreedActivationsInTheProcess) {
  CpuMeter();
  const struct mallinfo2 before = mallinfo2();
  std::optional<at::Tensor> t = at::empty({4 << 20}, at::kByte);  // 4 MiB
  const struct mallinfo2 held = mallinfo2();
  EXPECT_EQ(held.hblkhd, before.hblkhd) << "the tensor was mapped on its own";
  t.reset();
  const struct mallinfo2 after = mallinfo2();
  EXPECT_GE(after.arena, held.arena) << "the heap was trimmed";
  EXPECT_GE(after.fordblks - before.fordblks, size_t{4} << 20);
}
#endif

TEST(CpuMemoryMeterTest, TensorRaisesAndLowersByExactlyItsBytes) {
  MemoryMeter& meter = CpuMeter();
  const int64_t before = meter.Read().allocated_bytes;
  {
    // 1000 floats: 4000 bytes requested, counted without rounding.
    at::Tensor t = at::empty({1000}, at::kFloat);
    EXPECT_EQ(meter.Read().allocated_bytes - before, 4000);
    at::Tensor u = at::empty({3, 7}, at::kBFloat16);
    EXPECT_EQ(meter.Read().allocated_bytes - before, 4000 + 42);
  }
  EXPECT_EQ(meter.Read().allocated_bytes, before);
  const MemoryStats stats = meter.Read();
  EXPECT_EQ(stats.reserved_bytes, stats.allocated_bytes);
  EXPECT_EQ(stats.peak_reserved_bytes, stats.peak_allocated_bytes);
}

TEST(CpuMemoryMeterTest, ViewsAndEmptyTensorsAllocateNothing) {
  MemoryMeter& meter = CpuMeter();
  at::Tensor t = at::ones({64, 64});
  const int64_t before = meter.Read().allocated_bytes;
  at::Tensor view = t.transpose(0, 1);
  at::Tensor empty = at::empty({0}, at::kFloat);
  EXPECT_EQ(meter.Read().allocated_bytes, before);
}

TEST(CpuMemoryMeterTest, PeakSeesATemporaryInsideAnOp) {
  MemoryMeter& meter = CpuMeter();
  // [8, 512, 256] with a stride of 2 in its last dimension, which no GEMM
  // takes: matmul folds it to [4096, 256] for one GEMM by copying it into a
  // 4 MiB temporary, freed before it returns.
  at::Tensor a = at::randn({8, 512, 512}).slice(2, 0, 512, 2);
  at::Tensor b = at::randn({256, 128});
  meter.ResetPeak();
  const MemoryStats before = meter.Read();
  EXPECT_EQ(before.peak_allocated_bytes, before.allocated_bytes);
  constexpr int64_t kTemporaryBytes = 8 * 512 * 256 * 4;
  constexpr int64_t kResultBytes = 8 * 512 * 128 * 4;
  {
    at::Tensor c = at::matmul(a, b);
    EXPECT_EQ(meter.Read().allocated_bytes - before.allocated_bytes,
              kResultBytes);
  }
  const MemoryStats after = meter.Read();
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
  EXPECT_GE(after.peak_allocated_bytes - before.allocated_bytes,
            kTemporaryBytes + kResultBytes);
}

TEST(CpuMemoryMeterTest, ResetPeakDropsToCurrent) {
  MemoryMeter& meter = CpuMeter();
  const int64_t base = meter.Read().allocated_bytes;
  { at::Tensor big = at::empty({1 << 20}, at::kFloat); }
  EXPECT_GE(meter.Read().peak_allocated_bytes, base + (4 << 20));
  meter.ResetPeak();
  EXPECT_EQ(meter.Read().peak_allocated_bytes, base);
  at::Tensor small = at::empty({10}, at::kFloat);
  EXPECT_EQ(meter.Read().peak_allocated_bytes, base + 40);
}

TEST(CpuMemoryMeterTest, FreesOfOtherThreadsAndParallelOpsBalance) {
  MemoryMeter& meter = CpuMeter();
  const int64_t before = meter.Read().allocated_bytes;
  {
    std::vector<std::thread> threads;
    std::vector<at::Tensor> made(8);
    for (int i = 0; i < 8; ++i) {
      threads.emplace_back([&made, i] {
        for (int k = 0; k < 200; ++k) made[i] = at::empty({k + 1}, at::kFloat);
      });
    }
    for (std::thread& t : threads) t.join();
    int64_t expected = 0;
    for (const at::Tensor& t : made) expected += t.nbytes();
    EXPECT_EQ(meter.Read().allocated_bytes - before, expected);
  }
  EXPECT_EQ(meter.Read().allocated_bytes, before);
}

TEST(CpuMemoryMeterTest, CountsAllocationsOnIntraOpThreads) {
  MemoryMeter& meter = CpuMeter();
  const int64_t before = meter.Read().allocated_bytes;
  constexpr int kChunks = 64;
  std::vector<at::Tensor> made(kChunks);
  // grain 1: each chunk may run on any of ATen's intra-op threads.
  at::parallel_for(0, kChunks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) made[i] = at::empty({100}, at::kFloat);
  });
  EXPECT_EQ(meter.Read().allocated_bytes - before, kChunks * 400);
  made.clear();
  EXPECT_EQ(meter.Read().allocated_bytes, before);
}

TEST(MemoryAccountTest, ChargesUnchargesAndMovesExactlyAStoragesBytes) {
  CpuMeter();
  const int64_t two = ReadMemoryAccount(2), five = ReadMemoryAccount(5);
  at::Tensor kept;
  {
    ScopedMemoryAccount account(2);
    kept = at::empty({250}, at::kFloat);  // 1000 bytes
    {
      ScopedMemoryAccount inner(5);
      at::Tensor temp = at::empty({100}, at::kFloat);  // 400 bytes, freed
      EXPECT_EQ(ReadMemoryAccount(5), five + 400);
    }
    EXPECT_EQ(ReadMemoryAccount(5), five);
    at::Tensor outside;
    {
      ScopedMemoryAccount none(-1);
      outside = at::empty({10}, at::kFloat);
    }
    EXPECT_EQ(ReadMemoryAccount(2), two + 1000);
  }
  at::Tensor after = at::empty({10}, at::kFloat);  // no account open
  EXPECT_EQ(ReadMemoryAccount(2), two + 1000);
  // A view moves its whole storage; the free then uncharges the new account.
  ChargeStorageTo(kept.narrow(0, 0, 10), 5);
  EXPECT_EQ(ReadMemoryAccount(2), two);
  EXPECT_EQ(ReadMemoryAccount(5), five + 1000);
  ChargeStorageTo(at::Tensor(), 5);  // undefined: nothing
  kept.reset();
  EXPECT_EQ(ReadMemoryAccount(5), five);
}

// One test for both machines: without a GPU the meter must refuse with
// FailedPrecondition; with one it must count a CUDA tensor's bytes.
TEST(CudaMemoryMeterTest, FailedPreconditionWithoutAGpuCountsWithOne) {
  absl::StatusOr<std::unique_ptr<MemoryMeter>> meter =
      CreateMemoryMeter(at::Device(at::kCUDA, 0));
  if (!meter.ok()) {
    EXPECT_EQ(meter.status().code(), absl::StatusCode::kFailedPrecondition)
        << meter.status();
    EXPECT_NE(meter.status().message().find("no CUDA device"),
              std::string::npos)
        << meter.status();
    return;
  }
  const MemoryStats before = (*meter)->Read();
  at::Tensor t = at::empty({1 << 20}, at::TensorOptions().device(at::kCUDA));
  const MemoryStats during = (*meter)->Read();
  // 4 MiB is a multiple of the caching allocator's 512-byte rounding.
  EXPECT_EQ(during.allocated_bytes - before.allocated_bytes, 4 << 20);
  EXPECT_GE(during.reserved_bytes, during.allocated_bytes);
  t.reset();
  (*meter)->ResetPeak();
  const MemoryStats after = (*meter)->Read();
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
  EXPECT_EQ(after.peak_allocated_bytes, after.allocated_bytes);
}

TEST(MemoryMeterTest, OtherDevicesAreInvalid) {
  absl::StatusOr<std::unique_ptr<MemoryMeter>> meter =
      CreateMemoryMeter(at::Device(at::kMeta));
  ASSERT_FALSE(meter.ok());
  EXPECT_EQ(meter.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sacplan
