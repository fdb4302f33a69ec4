#pragma once
// CUDA kernel emulation on the CPU (issue 14): lets the project's `__global__` kernels run and be
// tested where there is no GPU. Under nvcc this header only defines CF_LAUNCH as `<<<>>>`; with a
// host compiler it provides the subset of CUDA the kernels in cf/gpu/kernels/ use:
//  - each CUDA thread of a block is a fiber (ucontext), `threadIdx` is switched with it;
//  - `__syncthreads()` yields to a round-robin scheduler of the block: a block advances barrier by
//    barrier, every live thread running up to its next barrier before any passes it. A thread that
//    exits while others wait at a barrier is a divergent barrier (undefined in CUDA): reported as
//    an error, never silently accepted;
//  - between two barriers the threads run one after another in a chosen order (forward or
//    reverse, see set_schedule): a kernel that lacks a barrier reads shared data another thread
//    has not written yet under one of the two orders, so running both and comparing the outputs
//    catches a missing barrier (tests/gpu);
//  - `__shared__` variables are `static thread_local`: one block runs at a time on an OS thread,
//    so they are per block; blocks run in parallel on OpenMP threads;
//  - atomicAdd / atomicMax are real atomics (blocks are concurrent).
// Not emulated (compile-only in CI, device tests only): warp shuffles and votes, tensor cores,
// streams, dynamic shared memory, cooperative groups.
#include <cstdint>

#if defined(__CUDACC__)

#define CF_LAUNCH(kernel, grid, block, ...) kernel<<<(grid), (block)>>>(__VA_ARGS__)
#define CF_EMULATED 0
// full unrolling of a loop with a compile-time trip count (keeps fixed-size arrays in registers)
#define CF_UNROLL _Pragma("unroll")
// unrolling by n (a loop whose index reaches no register array: fewer loads in flight)
#define CF_PRAGMA_(x) _Pragma(#x)
#define CF_UNROLL_N(n) CF_PRAGMA_(unroll n)
// a register budget for a kernel: at most `threads` per block, `blocks` resident per SM
#define CF_LAUNCH_BOUNDS(threads, blocks) __launch_bounds__(threads, blocks)

#else  // host compiler: emulation

#include <ucontext.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define CF_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CF_EMU_ASAN 1
#endif
#endif
#ifdef CF_EMU_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

#define CF_EMULATED 1
// With the CUDA toolkit on the include path (CCCL's Thrust pulls in its headers even on the
// OpenMP backend) dim3 comes from <vector_types.h>, and the CUDA qualifiers it defines as
// attributes are replaced by the emulation's meaning. Without it, an equivalent dim3.
#if __has_include(<vector_types.h>)
#include <vector_types.h>
#define CF_EMU_CUDA_DIM3 1
#endif
#undef __global__
#undef __device__
#undef __host__
#undef __forceinline__
#undef __shared__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static thread_local
#define CF_UNROLL
#define CF_UNROLL_N(n)
#define CF_LAUNCH_BOUNDS(threads, blocks)

#ifndef CF_EMU_CUDA_DIM3
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
#endif

namespace cf::gpu::emu {

/// Order in which the threads of a block run between two barriers.
enum class Schedule { Forward, Reverse };

/// The coordinates of the running CUDA thread (per OS thread; switched with each fiber).
struct ThreadCoords {
  dim3 threadIdx, blockIdx, blockDim, gridDim;
};
inline thread_local ThreadCoords g_coords;
inline std::atomic<int> g_schedule{0};

/// Set the intra-block schedule of later launches (tests run a kernel under both).
inline void set_schedule(Schedule s) { g_schedule.store(s == Schedule::Reverse ? 1 : 0); }

/// A launch failed (divergent barrier, an exception inside a kernel, too many threads).
class LaunchError : public std::runtime_error {
 public:
  explicit LaunchError(const std::string& w) : std::runtime_error(w) {}
};

namespace detail {

enum class State { Ready, AtBarrier, Done };

struct Fiber {
  ucontext_t ctx{};
  std::unique_ptr<char[]> stack;
  State state = State::Ready;
  dim3 tid;
};

struct BlockRun {
  ucontext_t sched{};
  std::vector<Fiber> fibers;
  const std::function<void()>* body = nullptr;
  Fiber* current = nullptr;
  std::exception_ptr error;
  std::size_t stack_bytes = 0;
#ifdef CF_EMU_ASAN
  void* fake_stack = nullptr;
  const void* sched_bottom = nullptr;
  std::size_t sched_size = 0;
#endif
};

inline thread_local BlockRun* g_block = nullptr;

// Switch from the running fiber back to the scheduler.
inline void yield_to_scheduler() {
  BlockRun* b = g_block;
  Fiber* f = b->current;
#ifdef CF_EMU_ASAN
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(f->state == State::Done ? nullptr : &fake, b->sched_bottom, b->sched_size);
#endif
  swapcontext(&f->ctx, &b->sched);
#ifdef CF_EMU_ASAN
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
}

inline void fiber_entry() {
  BlockRun* b = g_block;
#ifdef CF_EMU_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &b->sched_bottom, &b->sched_size);
#endif
  try {
    (*b->body)();
  } catch (...) {
    if (!b->error) b->error = std::current_exception();
  }
  b->current->state = State::Done;
  yield_to_scheduler();  // never returns: a Done fiber is not resumed
}

// Run one block: all its threads as fibers, barrier by barrier.
inline void run_block(const dim3& grid, const dim3& block, const dim3& bid, const std::function<void()>& body,
                      std::size_t stack_bytes) {
  BlockRun b;
  b.body = &body;
  b.stack_bytes = stack_bytes;
  const unsigned nthreads = block.x * block.y * block.z;
  b.fibers.resize(nthreads);
  unsigned k = 0;
  for (unsigned z = 0; z < block.z; ++z)
    for (unsigned y = 0; y < block.y; ++y)
      for (unsigned x = 0; x < block.x; ++x) b.fibers[k++].tid = dim3(x, y, z);
  BlockRun* saved = g_block;
  g_block = &b;
  g_coords.blockIdx = bid;
  g_coords.blockDim = block;
  g_coords.gridDim = grid;
  for (auto& f : b.fibers) {
    f.stack.reset(new char[stack_bytes]);
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = f.stack.get();
    f.ctx.uc_stack.ss_size = stack_bytes;
    f.ctx.uc_link = nullptr;
    makecontext(&f.ctx, fiber_entry, 0);
  }
  const bool reverse = g_schedule.load() == 1;
  for (;;) {
    for (unsigned i = 0; i < nthreads; ++i) {
      Fiber& f = b.fibers[reverse ? nthreads - 1 - i : i];
      if (f.state != State::Ready) continue;
      b.current = &f;
      g_coords.threadIdx = f.tid;
#ifdef CF_EMU_ASAN
      void* fake = nullptr;
      __sanitizer_start_switch_fiber(&fake, f.stack.get(), stack_bytes);
#endif
      swapcontext(&b.sched, &f.ctx);
#ifdef CF_EMU_ASAN
      __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
    }
    unsigned done = 0, waiting = 0;
    for (auto& f : b.fibers) {
      done += f.state == State::Done;
      waiting += f.state == State::AtBarrier;
    }
    if (done == nthreads) break;
    if (done > 0 && waiting > 0) {
      g_block = saved;
      throw LaunchError("emulated kernel: divergent __syncthreads (" + std::to_string(done) + " of " +
                        std::to_string(nthreads) + " threads exited while " + std::to_string(waiting) +
                        " wait at a barrier)");
    }
    for (auto& f : b.fibers)
      if (f.state == State::AtBarrier) f.state = State::Ready;
  }
  g_block = saved;
  if (b.error) std::rethrow_exception(b.error);
}

}  // namespace detail

/// Launch `body` (a call of the kernel with its arguments) on a grid of blocks. Blocks run in
/// parallel on OpenMP threads; the first error of any block is rethrown after all have finished.
/// Throws LaunchError for more than 1024 threads per block (the CUDA limit).
inline void launch(dim3 grid, dim3 block, const std::function<void()>& body, std::size_t stack_bytes = 64 * 1024) {
  const unsigned long long nthreads = 1ull * block.x * block.y * block.z;
  if (nthreads == 0 || nthreads > 1024)
    throw LaunchError("emulated launch: " + std::to_string(nthreads) + " threads per block (CUDA allows 1..1024)");
  const long long nblocks = 1ll * grid.x * grid.y * grid.z;
  std::exception_ptr first;
  // omp-exceptions: each block runs in try/catch; the first exception is kept in `first` and rethrown after the region
#pragma omp parallel for schedule(dynamic)
  for (long long i = 0; i < nblocks; ++i) {
    const dim3 bid(static_cast<unsigned>(i % grid.x), static_cast<unsigned>((i / grid.x) % grid.y),
                   static_cast<unsigned>(i / (1ll * grid.x * grid.y)));
    try {
      detail::run_block(grid, block, bid, body, stack_bytes);
    } catch (...) {
#pragma omp critical(cf_emu_first_error)
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

}  // namespace cf::gpu::emu

// The CUDA built-in variables of the running thread.
#define threadIdx (::cf::gpu::emu::g_coords.threadIdx)
#define blockIdx (::cf::gpu::emu::g_coords.blockIdx)
#define blockDim (::cf::gpu::emu::g_coords.blockDim)
#define gridDim (::cf::gpu::emu::g_coords.gridDim)

inline void __syncthreads() {
  auto* b = ::cf::gpu::emu::detail::g_block;
  b->current->state = ::cf::gpu::emu::detail::State::AtBarrier;
  ::cf::gpu::emu::detail::yield_to_scheduler();
}

inline float atomicAdd(float* addr, float v) {
  std::uint32_t old_bits, new_bits;
  __atomic_load(reinterpret_cast<std::uint32_t*>(addr), &old_bits, __ATOMIC_RELAXED);
  float old;
  do {
    std::memcpy(&old, &old_bits, 4);
    const float nv = old + v;
    std::memcpy(&new_bits, &nv, 4);
  } while (!__atomic_compare_exchange(reinterpret_cast<std::uint32_t*>(addr), &old_bits, &new_bits, false,
                                      __ATOMIC_RELAXED, __ATOMIC_RELAXED));
  return old;
}
inline int atomicAdd(int* addr, int v) { return __atomic_fetch_add(addr, v, __ATOMIC_RELAXED); }

inline float __expf(float x) { return std::exp(x); }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }

#define CF_LAUNCH(kernel, grid, block, ...) ::cf::gpu::emu::launch((grid), (block), [&] { kernel(__VA_ARGS__); })

#endif  // __CUDACC__
