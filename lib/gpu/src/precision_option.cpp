#include "cf/gpu/precision_option.hpp"

#include <iostream>

#include "cf/core/error.hpp"
#include "cf/core/validators.hpp"

namespace cf::gpu {

namespace {

std::string name_of(Precision p) { return std::string(kPrecisions.name(p)); }

/// The precision a checkpoint's train_config records (fp32 when the field is absent).
Precision saved_precision(const nlohmann::json& tc) {
  if (!tc.is_object() || !tc.contains("precision")) return Precision::Fp32;
  const nlohmann::json& v = tc.at("precision");
  const auto p = v.is_string() ? kPrecisions.find(v.get<std::string>()) : std::nullopt;
  require(p.has_value(), "checkpoint train_config field 'precision' must be ", kPrecisions.list(" or "), " (got ",
          v.dump(), ")");
  return *p;
}

}  // namespace

CLI::Option* add_precision_option(CLI::App& app, std::string& precision, PrecisionUse use) {
  const char* help =
      use == PrecisionUse::Training
          ? "number format of the device trainer's GEMMs: fp32, tf32 (tensor cores, float32 accumulation) or "
            "bf16 (mixed precision: bf16 GEMM inputs, float32 master weights, AdamW state and checkpoints); "
            "tf32 and bf16 need --device cuda (docs/gpu.md \"Precision policies\")"
          : "number format of the device model's linear-layer GEMMs: fp32 (float32, the CPU's round-off), tf32 "
            "(tensor cores, float32 accumulation) or bf16 (bf16 weights, stored bf16 used as they are, others "
            "rounded once; activations rounded to bf16 per GEMM; float32 accumulation and output); tf32 and bf16 "
            "need the device (docs/gpu.md \"Analysis model\")";
  return app.add_option("--precision", precision, help)->check(app::member_of(kPrecisions))->capture_default_str();
}

Precision resolve_analysis_precision(const std::string& value, Placement where) {
  const auto asked = kPrecisions.find(value);
  require(asked.has_value(), "--precision must be ", kPrecisions.list(" or "), " (got '", value, "')");
  require(where != Placement::Cpu || *asked == Precision::Fp32, "--precision ", value,
          " needs the device (--device cuda): the CPU analysers compute in float32 only");
  return *asked;
}

Precision resolve_precision(const std::string& value, bool given, Device device, const nlohmann::json* resumed,
                            bool quiet) {
  const auto asked = kPrecisions.find(value);
  require(asked.has_value(), "--precision must be ", kPrecisions.list(" or "), " (got '", value, "')");
  require(device == Device::Cuda || *asked == Precision::Fp32, "--precision ", value,
          " needs the device trainer (--device cuda): the CPU trainer computes in float32 only");
  if (!resumed) return *asked;
  const Precision saved = saved_precision(*resumed);
  const Precision used = given ? *asked : device == Device::Cuda ? saved : Precision::Fp32;
  if (used == saved) return used;
  require(used == Precision::Fp32, "--precision ", name_of(used), ": the --resume checkpoint was trained in ",
          name_of(saved), "; continue it in ", name_of(saved), " (omit --precision) or in fp32 (--precision fp32)");
  if (!quiet)
    std::cerr << "train: note: the --resume checkpoint was trained in " << name_of(saved)
              << "; this run continues it in fp32 (its float32 weights and AdamW moments are the whole state)\n";
  return used;
}

}  // namespace cf::gpu
