#pragma once
// The softmax branches of a layer's attention mask, for the libraries that build masks of their
// own from the trainer's layer config (lib/gpu's device plans, lib/probe's dense checks): the
// public face of cf/nn/detail/attention_masks.hpp, whose tile plans stay internal to lib/nn.
#include "cf/nn/detail/attention_masks.hpp"

namespace cf::nn {

/// One softmax branch: for every query row the admitted keys as sorted, disjoint closed intervals
/// (see detail::BranchRows).
using detail::BranchRows;
/// The softmax branches of layer `lc` at length Tn (Boundary repair (Yang) Eqs. 35-36 for bridges).
using detail::layer_branches;
/// Dense 0/1 mask of one branch, row-major Tn x Tn (row = query).
using detail::dense_mask;
/// Number of admitted (query, key) pairs of a branch.
using detail::admitted;

}  // namespace cf::nn
