#pragma once
// Where each stored tensor of a Hugging Face checkpoint lands in the causalflow parameter layout
// (cf::nn::make_layout), one tensor at a time (issues 13 and 30, docs/hf.md): the one description
// the float32 loader (load_hf_model: convert, then place) and the device analysis model's loader
// (lib/gpu: stage the stored bytes, then place them on the device in the stored dtype) both apply,
// so the families' layout knowledge lives here only. The operations (cf/hf/checkpoint.hpp):
//  - Copy: the same layout (possibly into a part of the lib/nn tensor: gate_proj / up_proj -> c_fc);
//  - Transpose: GPT-2's Conv1D weights [in, out] -> [out, in];
//  - Rows: a row permutation: GPT-NeoX / BLOOM's interleaved per-head query_key_value regrouped into
//    [q of all heads; k; v], and the RoPE families' rotate_half pairs permuted per head.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cf/hf/config.hpp"
#include "cf/nn/config.hpp"

namespace cf::hf {

enum class PieceOp { Copy, Transpose, Rows };

/// One stored tensor placed into (a part of) one lib/nn tensor.
struct TensorPiece {
  std::string hf;                   ///< the stored tensor's name (prefix included)
  std::vector<std::int64_t> shape;  ///< its shape, as the config implies it (checked on load)
  std::string cf;                   ///< the lib/nn tensor (a cf::nn::make_layout name)
  std::int64_t at = 0;              ///< the first element written, relative to the lib/nn tensor
  PieceOp op = PieceOp::Copy;
  std::vector<std::int64_t> rows;  ///< Rows: destination row r (of `cols` elements) reads stored row rows[r]
  std::int64_t cols = 1;           ///< Rows: elements per row

  std::int64_t numel() const;
  /// Rows: stored row -> destination row (every stored row is read exactly once).
  std::vector<std::int64_t> inverse_rows() const;
  /// Where stored element e (row-major) goes, relative to the lib/nn tensor's start; `inverse` is
  /// inverse_rows() for Rows (ignored otherwise). The per-element twin of place_float.
  std::int64_t destination(std::int64_t e, const std::vector<std::int64_t>& inverse) const;
};

/// Every stored tensor the model of `family` and config `c` reads, in the float32 loader's order
/// (its first missing tensor or wrong shape is the one named). `has` answers whether the checkpoint
/// holds a tensor (it picks the name prefix, e.g. GPT-2's optional "transformer."). A tied head reads
/// nothing (the LM head is wte).
std::vector<TensorPiece> tensor_pieces(Family family, const nn::ModelConfig& c,
                                       const std::function<bool(const std::string&)>& has);

/// Place stored tensor `stored` (piece.numel() floats, row-major, already converted) into the lib/nn
/// tensor starting at `cf_tensor`.
void place_float(const TensorPiece& piece, const float* stored, float* cf_tensor);

/// dst [cols, rows] = src [rows, cols]^T (GPT-2's Conv1D layout, both ways: import and export).
void transpose_blocked(const float* src, float* dst, std::int64_t rows, std::int64_t cols);

}  // namespace cf::hf
