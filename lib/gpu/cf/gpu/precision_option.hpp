#pragma once
// `--precision fp32|tf32|bf16` of `train` (issue 31; docs/gpu.md "Precision policies") and of the
// analysers on the device analysis model or the seeded pass (issue 30; docs/gpu.md "Analysis
// model"): the option and the rules that turn it, the device and a resumed checkpoint into the
// run's policy.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "cf/gpu/device.hpp"
#include "cf/gpu/device_option.hpp"
#include "cf/gpu/precision.hpp"

namespace cf::gpu {

/// Who computes under the policy: the trainer (float32 master state) or an analyser (inference and
/// seeded backward passes on the device); it only changes --precision's help.
enum class PrecisionUse { Training, Analysis };

/// Declare --precision on `app` (default "fp32"; anything but fp32|tf32|bf16 exits 2).
CLI::Option* add_precision_option(CLI::App& app, std::string& precision, PrecisionUse use = PrecisionUse::Training);

/// The precision an analyser computes in, once its placement `where` is known: tf32 and bf16 need
/// the device (Placement::Cuda or its emulated build); on the CPU, asked with --device cpu or
/// reached by --device auto's fallback, they throw cf::InvalidArgument (exit 2):
/// the CPU analysers compute in float32 only, and running them silently in fp32 would report other
/// numbers than asked for.
Precision resolve_analysis_precision(const std::string& value, Placement where);

/// The precision a `train` run computes in. `value`: --precision's value, `given`: whether the
/// command line set it; `resumed`: the train_config of the checkpoint a --resume continues (null
/// for a fresh run; its "precision" field, absent in checkpoints from before policies, is fp32).
///  - tf32 / bf16 need the device trainer: with --device cpu (the CPU trainer is float32 only)
///    they throw cf::InvalidArgument (exit 2) rather than run float32 silently.
///  - --resume without --precision continues in the checkpoint's precision on the device, in fp32
///    on the CPU (said on stderr unless `quiet` when the checkpoint's was another).
///  - --resume with another --precision than the checkpoint's: fp32 is allowed (the checkpoint is
///    the float32 master state, nothing is lost; said on stderr unless `quiet`); tf32 or bf16 over
///    a checkpoint of another precision is refused (cf::InvalidArgument): the run would silently
///    continue with other numerics than the run it resumes.
/// A checkpoint precision that is not a string naming a policy throws cf::InvalidArgument.
Precision resolve_precision(const std::string& value, bool given, Device device, const nlohmann::json* resumed,
                            bool quiet);

}  // namespace cf::gpu
