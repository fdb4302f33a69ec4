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

/// One head's query and key maps, d_model x d_head each (double precision).
struct HeadWeights {
  Eigen::MatrixXd W_Q, W_K;
};

/// One layer's attention weights.
struct LayerWeights {
  std::string attn = "full";  ///< attention variant name from the config ("full", "sd", ...)
  int d_head = 0;
  std::vector<HeadWeights> heads;  ///< n_head entries
  Eigen::MatrixXd damp_w;          ///< S–D only: H x d_model (d_i = softplus(w_h . x_i + b_h) + eps)
  Eigen::VectorXd damp_b;          ///< S–D only: H
  double sd_eps = 0;               ///< S–D damping offset from the config
};

/// The attention part of a checkpoint.
struct AttentionWeights {
  int n_layer = 0, n_head = 0, d_model = 0;
  std::string pos, norm;        ///< config "pos" and "norm"
  nlohmann::json config;        ///< the full `config` attribute
  std::vector<LayerWeights> layers;
};

/// Read the attention weights of `path`. Throws cf::InvalidArgument (exit 2 in apps) naming the
/// file and the problem when it is missing, not a causalflow checkpoint, has no `config`, or
/// lacks `/params/h.{l}.attn.c_attn.weight` of shape [3 H d_head, d_model] (e.g. "checkpoint
/// without attention weights").
AttentionWeights read_attention_weights(const std::string& path);

/// Build AttentionWeights from a config JSON (checkpoint `config` attribute) and, per layer l,
/// the row-major c_attn weight [3 H d_head, d_model] (PyTorch layout, float or double values)
/// (callers holding the tensor in memory; read_attention_weights reads only the Q/K rows).
/// Throws cf::InvalidArgument on shape mismatches, naming layer and shapes.
LayerWeights layer_weights_from_c_attn(const Eigen::MatrixXd& c_attn, int n_head, int d_head,
                                       const std::string& attn, int layer);

/// Parse "all" | "L" | "A-B" | "A,B,C-D" into sorted distinct layer indices in [0, n_layer).
/// Throws cf::InvalidArgument naming the spec, the offending index and n_layer when out of range.
std::vector<int> parse_layer_spec(const std::string& spec, int n_layer);

}  // namespace cf::spectral
