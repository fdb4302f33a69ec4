#pragma once
// The table of attention variants (issue 28): every AttnKind maps to one variant unit
// (cf/nn/detail/variants/), which owns its parameters, saved state, score policy, dense oracle,
// tiled forward/backward and its GPU hook. forward_backward reaches a layer's attention only
// through this table (the one dispatch point), and the parameter layout and param_count read the
// units' parameter blocks from it. register_attention_variant is the extension point: a unit
// defined outside lib/nn (a test's toy variant) gets a new AttnKind, its name in the schedule
// parser and its parameters in the layout without any edit to lib/nn. docs/trainer.md "Attention
// variants as units" has the recipe.
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "cf/nn/config.hpp"
#include "cf/nn/params.hpp"

namespace cf::nn {

namespace detail {
template <class T>
struct AttnLayer;
}

/// One tensor of a unit's parameter block, per layer: name after "h.{l}." (e.g. "attn.damp.weight"),
/// PyTorch shape, and the LayerOffsets field that names it for other libraries (null: only in
/// LayerOffsets::variant, which lists every tensor of the block in order).
struct VariantParam {
  std::string name;
  std::vector<std::int64_t> shape;
  std::int64_t LayerOffsets::*slot = nullptr;
};

/// Which of lib/gpu's device-trainer kernel forms computes a variant's heads (cf::gpu::AttnForm,
/// cf/gpu/train_plan.hpp, maps one to one): a softmax of scaled dot products 1/sqrt(d_head) (under
/// the layer's masks and ALiBi), S-D's skew logits with damping (the unit's parameters in
/// LayerOffsets::damp_w / damp_b, LayerConfig::sd_eps), the runway rewiring in its dot or bilinear
/// form (B in LayerOffsets::runway_B), or ELU+1 linear attention. None: no form.
enum class GpuForm { None, Softmax, Sd, RunwayDot, RunwayBilinear, Linear };

/// What lib/gpu does with a variant (the unit's GPU hook). `kernel`: lib/gpu's tiled attention
/// kernel computes its scores (cf/gpu/attention.hpp: plain scaled dot product, or its
/// AttentionExtras for S-D and runway); `trainer`: the device trainer runs layers of it (else `train
/// --device cuda` refuses the config naming the variant), with the kernel form `form`, which a
/// unit saying `trainer` must name (make_variant_entry checks built-in units at compile time,
/// register_attention_variant refuses a registered one without it).
struct GpuHook {
  bool kernel = false;
  bool trainer = false;
  GpuForm form = GpuForm::None;
};

/// One layer's attention in one pass, for scalar T: forward writes the head outputs (atty) and the
/// unit's saved state; backward turns d atty into d qkv, d of the sub-layer input and the unit's
/// parameter gradients; probs writes head h of sequence b's T x T probabilities for the capture hook.
template <class T>
struct VariantKernels {
  void (*forward)(detail::AttnLayer<T>&) = nullptr;
  void (*backward)(detail::AttnLayer<T>&) = nullptr;
  void (*probs)(detail::AttnLayer<T>&, int b, int h, float* dst) = nullptr;
};

/// A variant unit as the table holds it (made by detail::make_variant_entry<Unit>()).
struct VariantEntry {
  /// Canonical name and accepted aliases (registered variants; the built-in kinds' names are
  /// attn_name / parse_attn_kind's).
  std::string name;
  std::vector<std::string> aliases;
  /// The unit's parameter block of layer l (empty: no parameters of its own).
  std::vector<VariantParam> (*params)(const ModelConfig& c, int l) = nullptr;
  GpuHook gpu;
  VariantKernels<float> f32;
  VariantKernels<double> f64;
  template <class T>
  const VariantKernels<T>& kernels() const {
    if constexpr (std::is_same_v<T, float>)
      return f32;
    else
      return f64;
  }
};

/// The unit of kind k (built-in or registered); throws cf::InvalidArgument for an unknown kind.
const VariantEntry& attention_variant(AttnKind k);

/// Register a variant unit under entry.name (and its aliases); returns its new AttnKind, which
/// parse_attn_kind, attn_name, configs, layouts, checkpoints and forward_backward then accept.
/// Refuses (cf::InvalidArgument) a name or alias that is already taken. Not thread-safe: register
/// before any model is built.
AttnKind register_attention_variant(VariantEntry entry);

/// The registered kind named s (case as given, after the parser's lower-casing), or false.
bool find_registered_variant(const std::string& s, AttnKind& out);

/// Whether k is a registered (not built-in) kind.
bool is_registered_variant(AttnKind k);

/// The parameter block of layer l of c (the unit's VariantParam list).
std::vector<VariantParam> variant_params(const ModelConfig& c, int l);

}  // namespace cf::nn
