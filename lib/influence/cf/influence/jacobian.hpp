#pragma once
// Exact Jacobian block norms of a trained model (Runway (Lee & Clark), Lee & Clark, Theorem 3.3; docs/spec.md
// section 2):  J_ds = || d h_d(L+r) / d h_s(L) ||,  h(l) the residual stream entering block l
// (a whole block, attention plus MLP, is one layer; h(n_layer) is taken before the final norm),
// both in the Frobenius and in the spectral norm, and the head-mean attention A(l) on the same
// input that the bound [(I + A(L+r-1)) ... (I + A(L))]_ds is built from.
//
// Method (reverse mode, why): one vector-Jacobian product seeded with e_c at (d, h(L+r)) gives row c
// of every block J_ds, s = 0..d, at once; a d_model x d_model block row needs d_model of them.
// By causality h_d(L+r) depends only on positions 0..d, so the products for target d run on the
// prefix of d + 1 tokens: the total cost is sum_d (d + 1) ~ n^2 / 2 token-passes per seed channel
// instead of n^2. Forward mode over a basis would need the same n * d_model products (one per
// source position and channel) on suffixes of the same total length, and the model has no tangent
// pass: reverse mode reuses its backward pass. The d_model seeds of one target are batched as
// d_model copies of the prefix in one forward_backward call (B = d_model, or chunks of `seed_batch`),
// on the CPU or on a device (a cf::nn::SeededPass, cf/influence/seeded_pass.hpp).
#include <Eigen/Dense>
#include <cstdint>
#include <vector>

#include "cf/core/progress.hpp"
#include "cf/nn/model.hpp"
#include "cf/rollout/kernel.hpp"

namespace cf::influence {

/// Block norms between h(L) and h(L + r).
struct JacobianBlocks {
  int layer = 0, span = 1, n = 0, d_model = 0;
  Eigen::MatrixXd frobenius;  ///< [n, n], entry (d, s) = ||J_ds||_F; zero for s > d (causality)
  Eigen::MatrixXd spectral;   ///< [n, n], largest singular value of J_ds
  /// Only with keep_blocks: the blocks themselves, blocks[d * n + s] = d h_d(L+r) / d h_s(L)
  /// (d_model x d_model, row = output channel), empty for s > d.
  std::vector<Eigen::MatrixXd> blocks;
  std::int64_t vjps = 0;            ///< vector-Jacobian products (= n * d_model)
  std::int64_t backward_calls = 0;  ///< batched forward_backward calls
  std::int64_t token_passes = 0;    ///< sum over calls of B * T (tokens through the span)
};

/// J for one window `tokens` (1 <= n <= block_size) between layers L and L + r
/// (0 <= L, 1 <= r, L + r <= n_layer). seed_batch: VJPs per call (0 = d_model). `progress`
/// (optional) advances by the token passes B * T of every backward call. `pass`: where the
/// batched passes run (empty = cf::nn::forward_backward on the CPU). Throws cf::InvalidArgument for
/// out-of-range layers or tokens.
template <class T>
JacobianBlocks jacobian_blocks(const nn::Model<T>& model, const std::vector<std::int32_t>& tokens, int L, int r,
                               bool keep_blocks = false, int seed_batch = 0, Progress* progress = nullptr,
                               const nn::SeededPass<T>& pass = {});

/// The work of one jacobian_blocks call on n tokens: backward_calls = n ceil(d_model / B) batched
/// calls, token_passes = d_model n (n + 1) / 2 (seeds x prefix lengths), pass_tokens = B n (the
/// longest call, the unit time_jacobian_pass measures); B = seed_batch, or d_model when 0.
struct JacobianCost {
  std::int64_t backward_calls = 0, token_passes = 0, pass_tokens = 0;
};
JacobianCost jacobian_blocks_cost(int d_model, int n, int seed_batch);

/// Seconds of one backward call of jacobian_blocks at its longest prefix (all n tokens, a full seed
/// batch; the faster of two, the first warms up): the unit of the jacobian tool's cost estimate (estimated seconds ~
/// this x token_passes / pass_tokens; shorter prefixes cost less per token only through fixed overheads).
/// `pass` as in jacobian_blocks.
double time_jacobian_pass(const nn::Model<float>& model, const std::vector<std::int32_t>& tokens, int L, int r,
                          int seed_batch, const nn::SeededPass<float>& pass = {});

/// Head-mean attention A(l) of every layer on `tokens` (Runway (Lee & Clark)'s A; docs/spec.md section 2), n x n lower
/// triangular, each row normalised to sum 1 in double. Rows of branch-fused bridge layers sum to 2
/// where the bridge branch admits a key (cf::nn::LayerActivations): `row_normalised[l]` says that
/// layer l had rows summing to more than 1 + 1e-4 before the normalisation.
struct LayerAttention {
  std::vector<rollout::RowMatrix> A;
  std::vector<bool> row_normalised;
};
LayerAttention layer_attention(const nn::Model<float>& model, const std::vector<std::int32_t>& tokens);

}  // namespace cf::influence
