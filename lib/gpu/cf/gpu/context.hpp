#pragma once
// The execution context of the device paths (issue 28; docs/architecture.md "Execution
// contexts"): what used to be read from the environment at every call or created per call now
// lives in one object that the caller creates and passes in.
//  - options: which attention kernels run plain softmax heads, whether `--device cuda` runs the
//    emulated build, the CUDA device ordinal;
//  - the CUDA back end's resources: the stream, the cuBLAS and cuSOLVER handles, created once on
//    first use and destroyed with the context (RAII; the emulated back end needs none).
// Every operation of cf/gpu/ops.hpp and the device trainer take a Context&; the overloads without
// one use default_context(), which is created once (explicitly at start-up, or from the
// environment at first use) and never modified afterwards. Plain types only: safe for nvcc.
#include <memory>
#include <mutex>

#include "cf/core/enum_table.hpp"

namespace cf::gpu {

/// The two builds of every device operation and of the device trainer (docs/gpu.md "Twins").
enum class Backend {
  Emulated,  ///< host memory, the CUDA kernels under the emulation header, Thrust on OpenMP, OpenBLAS
  Cuda,      ///< device memory, the kernels compiled by nvcc, Thrust on CUDA, cuBLAS / cuSOLVER
};

/// Which attention kernels run: the FlashAttention-2 style ones (kernels/flash_attention.cuh, the
/// default: plain, S-D and runway heads), the register-resident one-row-per-thread ones for plain
/// heads (kernels/attention.cuh: the reference the flash kernels are checked against; S-D and
/// runway heads on the general kernels) or the general ones for every head (the reference of the
/// flash S-D and runway kernels; side-by-side benchmarks, docs/benchmarks.md; tests run all
/// three). A head with both S-D and a runway (no model builds one) runs the general kernels.
/// Flash follows the call's precision (AttentionShape::precision) on plain heads: float32 flash
/// kernels under fp32; under tf32 / bf16 the tensor-core kernels (kernels/flash_attention_mma.cuh)
/// on a device and their rounded reference (the flash kernels rounding their operands) on the
/// emulated build. Flash32 keeps the float32 flash kernels under every precision; Rounded runs the
/// rounded reference on either build (the device tests compare the tensor-core kernels with it).
/// S-D and runway heads run the float32 flash kernels under all three. Plain and Generic are
/// float32 under every precision.
enum class AttentionPath { Flash, Flash32, Rounded, Plain, Generic };

/// Their names (CF_GPU_ATTENTION).
inline constexpr EnumTable kAttentionPaths{std::array{
    EnumEntry<AttentionPath>{AttentionPath::Flash, "flash"},
    EnumEntry<AttentionPath>{AttentionPath::Flash32, "flash32"},
    EnumEntry<AttentionPath>{AttentionPath::Rounded, "rounded"},
    EnumEntry<AttentionPath>{AttentionPath::Plain, "plain"},
    EnumEntry<AttentionPath>{AttentionPath::Generic, "generic"},
}};

/// What a Context is made from.
struct ContextOptions {
  AttentionPath attention = AttentionPath::Flash;
  /// `--device cuda` runs the emulated build on the CPU instead of a device (a test device).
  bool emulate = false;
  /// CUDA device ordinal the CUDA back end's resources are created on.
  int device = 0;
  /// The device trainer's GEMMs run their bias / GELU epilogues fused (cuBLASLt, or its emulated
  /// twin; cf/gpu/gemm_epilogue.hpp); false: always the plain GEMM and separate passes, the path
  /// taken where cuBLASLt refuses a shape (tests reach it on the emulated build this way).
  bool fused_epilogues = true;

  /// The documented environment overrides, read here and nowhere else: CF_GPU_ATTENTION = flash
  /// | flash32 | rounded | plain | generic (unset: flash), CF_GPU_EMULATE = 1 | 0 (unset or empty:
  /// 0). Throws cf::InvalidArgument naming the variable for any other value.
  static ContextOptions from_environment();
};

/// One execution context. Not copyable (it owns device handles). Operations on one context are
/// issued in order on its stream; use one context per host thread that issues device work.
class Context {
 public:
  explicit Context(ContextOptions o = {}) : o_(o) {}
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const ContextOptions& options() const { return o_; }
  AttentionPath attention() const { return o_.attention; }

  /// Resources a back end keeps per context (the CUDA build's stream and handles, defined in
  /// lib/gpu/src/cuda_resources.hpp). Destroyed with the context.
  struct Resources {
    virtual ~Resources() = default;
  };
  /// The back end's resources, made by `make()` (returning std::unique_ptr<R>) on the first call
  /// (thread-safe) and the same object afterwards. Only the CUDA back end uses this slot.
  template <class R, class Make>
  R& resources(Make&& make) {
    std::call_once(once_, [&] { res_ = make(); });
    return static_cast<R&>(*res_);
  }

 private:
  ContextOptions o_;
  std::once_flag once_;
  std::unique_ptr<Resources> res_;
};

/// The process's default context, used by every overload without a Context argument (the
/// signatures callers had before contexts existed). Created once: by init_default_context at
/// start-up or, when nothing did, from ContextOptions::from_environment() at the first call
/// (throws cf::InvalidArgument for a bad environment value, and again at the next call). Its
/// options never change afterwards.
Context& default_context();

/// Create the default context from `o`, at start-up, before any device work. Throws cf::Error
/// when it exists already (a second start-up, or a call after device work began).
void init_default_context(const ContextOptions& o);

}  // namespace cf::gpu
