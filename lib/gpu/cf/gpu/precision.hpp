#pragma once
// Precision policies of the device trainer (issue 31; docs/gpu.md "Precision policies"): in which
// number format its GEMMs and its attention's products read their inputs. Everything else (master
// weights, gradients, AdamW moments, norms, softmax statistics, the loss, checkpoints) stays float32
// under every policy.
// Plain types only, safe for nvcc: the rounding functors run in Thrust transforms of both builds
// (the emulated build rounds exactly as the CUDA build does before its tensor-core GEMMs).
#include <cstdint>
#include <cstring>

#include "cf/core/enum_table.hpp"
#include "cf/gpu/functors.hpp"

namespace cf::gpu {

/// How the device trainer's GEMMs read their inputs. All accumulate and write in float32.
enum class Precision {
  Fp32,  ///< float32 inputs, SGEMM (the oracle's numerics; bit-identical to the trainer before policies)
  Tf32,  ///< inputs rounded to TF32 (10 explicit mantissa bits, round to nearest even), tensor cores
  Bf16,  ///< inputs rounded to bfloat16 (7 explicit mantissa bits, nearest even), tensor cores
};

/// Their names (`train --precision`, the run's train_config and report).
inline constexpr EnumTable kPrecisions{std::array{
    EnumEntry<Precision>{Precision::Fp32, "fp32", "", "float32 GEMMs (the default)"},
    EnumEntry<Precision>{Precision::Tf32, "tf32", "", "GEMM inputs rounded to TF32, float32 accumulation"},
    EnumEntry<Precision>{Precision::Bf16, "bf16", "",
                         "GEMM inputs in bfloat16 (weight copies made once per update), float32 accumulation"},
}};

namespace detail {
CF_HD inline std::uint32_t float_bits(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
CF_HD inline float bits_float(std::uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}
}  // namespace detail

/// x rounded to TF32 (sign, 8 exponent bits, 10 explicit mantissa bits), round to nearest, ties to
/// even, as float32 (the low 13 mantissa bits zero). Inf and NaN pass unchanged; a value past the
/// largest TF32 number rounds to Inf, as IEEE rounding does.
struct RoundTf32 {
  CF_HD float operator()(float x) const {
    const std::uint32_t u = detail::float_bits(x);
    if ((u & 0x7f800000u) == 0x7f800000u) return x;
    const std::uint32_t r = u + 0x0fffu + ((u >> 13) & 1u);
    return detail::bits_float(r & ~0x1fffu);
  }
};

/// The bfloat16 bits of x (the high half of a float32), round to nearest, ties to even; NaN stays
/// a (quiet) NaN.
struct ToBf16 {
  CF_HD std::uint16_t operator()(float x) const {
    const std::uint32_t u = detail::float_bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
    return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
};

/// The float32 value of bfloat16 bits (exact).
struct FromBf16 {
  CF_HD float operator()(std::uint16_t h) const { return detail::bits_float(static_cast<std::uint32_t>(h) << 16); }
};

/// The operand roundings of the attention kernels' products (kernels/flash_attention.cuh: the
/// reference; kernels/flash_attention_mma.cuh: the tensor cores), float to float.
/// RoundFp32: none (the float32 flash kernels, bit for bit).
struct RoundFp32 {
  CF_HD float operator()(float x) const { return x; }
};
/// RoundBf16: x rounded to bfloat16 (ToBf16, nearest even), as float32 (exact).
struct RoundBf16 {
  CF_HD float operator()(float x) const { return FromBf16()(ToBf16()(x)); }
};

namespace emu {
/// Row-major C = alpha op(A) op(B) + beta C in policy `p` exactly as the emulated device trainer
/// runs a GEMM (tests): A read as an activation (rounded into scratch per call), B as a weight
/// (`b_is_weight`: from the copy rounded once, as after an update) or as an activation; then
/// OpenBLAS SGEMM on the rounded values (TF32 and bf16 products are exact in float32).
void precision_gemm(Precision p, bool ta, bool tb, int m, int n, int k, float alpha, const float* A, int lda,
                    const float* B, int ldb, bool b_is_weight, float beta, float* C, int ldc);
}  // namespace emu

}  // namespace cf::gpu
