// The CUDA emulation header (lib/gpu/cf/gpu/emulation.hpp): barriers, shared memory per block,
// atomics across concurrent blocks, and the two failure modes it must catch (a divergent
// barrier, a missing barrier) — so that "the kernel passed under emulation" means something.
#include <catch2/catch.hpp>
#include <numeric>
#include <vector>

#include "cf/gpu/emulation.hpp"

namespace {

// Reverse a block's slice through shared memory: correct only with the barrier.
template <bool kBarrier>
__global__ void reverse_kernel(const int* in, int* out) {
  __shared__ int tile[64];
  const int base = blockIdx.x * 64;
  tile[threadIdx.x] = in[base + threadIdx.x];
  if (kBarrier) __syncthreads();
  out[base + threadIdx.x] = tile[63 - threadIdx.x];
}

__global__ void divergent_kernel(int* out) {
  if (threadIdx.x % 2 == 0) {
    __syncthreads();  // only the even threads reach this barrier
  }
  out[threadIdx.x] = 1;
}

__global__ void atomic_kernel(float* sum) { atomicAdd(sum, 1.0f); }

__global__ void throwing_kernel(int n) {
  if (static_cast<int>(threadIdx.x) == n) throw std::runtime_error("kernel failure");
}

std::vector<int> run_reverse(bool barrier, cf::gpu::emu::Schedule s) {
  std::vector<int> in(64 * 5), out(in.size(), -1);
  std::iota(in.begin(), in.end(), 0);
  cf::gpu::emu::set_schedule(s);
  const int* pin = in.data();
  int* pout = out.data();
  if (barrier) {
    CF_LAUNCH(reverse_kernel<true>, dim3(5), dim3(64), pin, pout);
  } else {
    CF_LAUNCH(reverse_kernel<false>, dim3(5), dim3(64), pin, pout);
  }
  cf::gpu::emu::set_schedule(cf::gpu::emu::Schedule::Forward);
  return out;
}

}  // namespace

TEST_CASE("emulation: shared memory and __syncthreads give the CUDA result under both schedules", "[gpu][emu]") {
  for (auto s : {cf::gpu::emu::Schedule::Forward, cf::gpu::emu::Schedule::Reverse}) {
    const auto out = run_reverse(true, s);
    for (int b = 0; b < 5; ++b)
      for (int t = 0; t < 64; ++t) REQUIRE(out[b * 64 + t] == b * 64 + 63 - t);
  }
}

TEST_CASE("emulation: a missing barrier is caught by comparing the two schedules", "[gpu][emu]") {
  const auto fwd = run_reverse(false, cf::gpu::emu::Schedule::Forward);
  const auto rev = run_reverse(false, cf::gpu::emu::Schedule::Reverse);
  CHECK(fwd != rev);  // the race is visible: tests of kernels run both schedules
}

TEST_CASE("emulation: a divergent __syncthreads is an error, not a silent result", "[gpu][emu]") {
  std::vector<int> out(32, 0);
  int* p = out.data();
  REQUIRE_THROWS_WITH(([&] { CF_LAUNCH(divergent_kernel, dim3(1), dim3(32), p); }()),
                      Catch::Contains("divergent __syncthreads"));
}

TEST_CASE("emulation: atomicAdd is atomic across concurrent blocks", "[gpu][emu]") {
  float sum = 0;
  float* p = &sum;
  CF_LAUNCH(atomic_kernel, dim3(200), dim3(50), p);
  REQUIRE(sum == 10000.0f);
}

TEST_CASE("emulation: an exception in a kernel thread reaches the caller, bad launches refused", "[gpu][emu]") {
  REQUIRE_THROWS_WITH(([&] { CF_LAUNCH(throwing_kernel, dim3(3), dim3(16), 7); }()), "kernel failure");
  REQUIRE_THROWS_AS(([&] { CF_LAUNCH(throwing_kernel, dim3(1), dim3(2048), 7); }()), cf::gpu::emu::LaunchError);
}
