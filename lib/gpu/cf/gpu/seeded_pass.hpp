#pragma once
// The device trainer's seeded passes from the host's side (issue 30; docs/gpu.md "Analysers on the
// device"): a cf::nn::SeededPass that runs cf::nn::forward_backward's seeded backward
// (cf/nn/gradient_seed.hpp) on the device trainer, for lib/influence's influence (Position bias
// (Herasimchyk et al.) Eq. 6) and Jacobian blocks (Runway (Lee & Clark) Theorem 3.3), which take it
// without depending on lib/gpu.
#include <string>

#include "cf/gpu/context.hpp"
#include "cf/gpu/device_option.hpp"
#include "cf/gpu/precision.hpp"
#include "cf/nn/model.hpp"

namespace cf::gpu {

/// Where a seeded analysis (influence, jacobian) of a model of config `c` runs: `where` is
/// resolve_device's answer to `device` (cpu | cuda | auto). A config the device trainer does not
/// run (cf::gpu::device_train_unsupported) is refused for --device cuda (cf::InvalidArgument naming
/// it, exit 2) and runs on the CPU for --device auto after one stderr line "<tool>: --device auto:
/// ...; running on the CPU", as placement_for_model does for the analysis model.
Placement placement_for_seeded(Placement where, const std::string& device, const std::string& tool,
                               const nn::ModelConfig& c);

/// A cf::nn::SeededPass on the device trainer of `where` (Placement::Emulated or Placement::Cuda),
/// built for analysis (TrainerUse::Analysis: the backward computes no parameter gradient). `model`
/// is uploaded once and must outlive the pass. Batches of any B x T run on one trainer, allocated
/// for the largest shape asked so far and at least max_B x max_T (the caller's largest batch:
/// influence's windows per pass x n, jacobian's seed batch x n; 0 = none known) and reshaped for
/// smaller ones, so that prefixes of every length reuse the parameters on the device. A
/// top-prediction seed (cf::nn::TopSeed, influence's) is evaluated on the device; an on_probs seed's
/// probabilities cross to the host and back (TrainerSeed). Non-finite probabilities or read-outs
/// (weights that overflow float32) throw cf::InvalidArgument, as the CPU's forward pass does. Throws
/// cf::InvalidArgument for Placement::Cpu, for Placement::Cuda in a build without CUDA, or a config the trainer
/// refuses. `precision`: the trainer's GEMM policy (cf/gpu/precision.hpp; forward and the input-gradient
/// chain's GEMMs; the weights' copy is made once, at the upload).
nn::SeededPass<float> device_seeded_pass(Placement where, const nn::Model<float>& model, int max_B = 0, int max_T = 0,
                                         Context& ctx = default_context(), Precision precision = Precision::Fp32);

}  // namespace cf::gpu
