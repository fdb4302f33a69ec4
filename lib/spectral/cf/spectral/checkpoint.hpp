#pragma once
// The attention weights of a causalflow checkpoint (docs/checkpoint_format.md), as the per-head
// query/key maps of the papers: W_Q(h) = c_attn.weight[h*d_head:(h+1)*d_head, :]^T (d_model x
// d_head), likewise W_K; plus S–D damping weights. Only what the weight-level analysis needs is
// read (never the MLP or optimizer state), so a GPT-2-124M-shaped checkpoint loads in well under
// a second.
#include <Eigen/Dense>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace cf::spectral {

/// One layer's attention weights.
struct LayerWeights {
  std::string attn = "full";  ///< attention variant name from the config ("full", "sd", ...)
  int n_head = 0, d_head = 0, d_model = 0;
  /// The query and key rows of c_attn.weight exactly as stored (float32): the first 2 H d_head
  /// rows of the row-major [3 H d_head, d_model] tensor, which is the column-major
  /// d_model x 2 H d_head matrix [W_Q(0) .. W_Q(H-1), W_K(0) .. W_K(H-1)]. Kept in the HDF5 read
  /// buffer itself: no per-head copies, no double conversion at read time (analyses convert one
  /// head at a time, in parallel).
  std::vector<float> qk;
  /// W_Q(h): d_model x d_head view into qk (0 <= h < n_head; not checked).
  Eigen::Map<const Eigen::MatrixXf> W_Q(int h) const {
    return {qk.data() + std::size_t(h) * std::size_t(d_head) * std::size_t(d_model), d_model, d_head};
  }
  /// W_K(h): d_model x d_head view into qk (0 <= h < n_head; not checked).
  Eigen::Map<const Eigen::MatrixXf> W_K(int h) const {
    return {qk.data() + std::size_t(n_head + h) * std::size_t(d_head) * std::size_t(d_model), d_model, d_head};
  }
  Eigen::MatrixXd damp_w;  ///< S–D only: H x d_model (d_i = softplus(w_h . x_i + b_h) + eps)
  Eigen::VectorXd damp_b;  ///< S–D only: H
  double sd_eps = 0;       ///< S–D damping offset from the config
};

/// The attention part of a checkpoint.
struct AttentionWeights {
  std::string path;  ///< the checkpoint file or directory read (named in analysis errors)
  int n_layer = 0, n_head = 0, d_model = 0;
  std::string pos, norm;  ///< config "pos" and "norm"
  nlohmann::json config;  ///< the full `config` attribute
  std::vector<LayerWeights> layers;
};

/// Read the attention weights of `path` (an HDF5 checkpoint, or a Hugging Face checkpoint
/// directory loaded through cf::model::load_model, docs/hf.md). Throws cf::InvalidArgument (exit 2 in apps) naming the
/// file and the problem when it is missing, not a causalflow checkpoint, has no `config`, or
/// lacks `/params/h.{l}.attn.c_attn.weight` of shape [3 H d_head, d_model] (e.g. "checkpoint
/// without attention weights").
AttentionWeights read_attention_weights(const std::string& path);

/// Parse "all" | "L" | "A-B" | "A,B,C-D" into sorted distinct layer indices in [0, n_layer).
/// Throws cf::InvalidArgument naming the spec, the offending index and n_layer when out of range,
/// and naming `option` for an empty item (cf/core/list.hpp: "", "0,", "0,,1").
std::vector<int> parse_layer_spec(const std::string& spec, int n_layer, const std::string& option = "--layers");

}  // namespace cf::spectral
