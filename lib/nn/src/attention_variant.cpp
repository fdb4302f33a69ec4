// The table of attention variants (cf/nn/attention_variant.hpp): each built-in AttnKind's unit, and
// the units registered at run time under new kinds.
#include "cf/nn/attention_variant.hpp"

#include <algorithm>
#include <deque>

#include "cf/core/error.hpp"
#include "cf/nn/detail/variants/dot.hpp"
#include "cf/nn/detail/variants/linear.hpp"
#include "cf/nn/detail/variants/runway.hpp"
#include "cf/nn/detail/variants/sd.hpp"

namespace cf::nn {

namespace {

// Registered kinds are numbered from here on (after the built-in enumerators).
constexpr int kFirstRegistered = 1000;

const VariantEntry& built_in(AttnKind k) {
  static const VariantEntry dot = detail::make_variant_entry<detail::DotUnit>();
  static const VariantEntry runway_dot = detail::make_variant_entry<detail::RunwayUnit<false>>();
  static const VariantEntry runway_bilinear = detail::make_variant_entry<detail::RunwayUnit<true>>();
  static const VariantEntry sd = detail::make_variant_entry<detail::SdUnit>();
  static const VariantEntry linear = detail::make_variant_entry<detail::LinearUnit>();
  switch (k) {
    case AttnKind::Full:
    case AttnKind::Block:
    case AttnKind::Swa:
    case AttnKind::Bridge:
    case AttnKind::Pbb:
    case AttnKind::SeBridge:
      return dot;  // the mask families differ only in their branches (cf/nn/detail/attention_masks.hpp)
    case AttnKind::RunwayDot:
      return runway_dot;
    case AttnKind::RunwayBilinear:
      return runway_bilinear;
    case AttnKind::Sd:
      return sd;
    case AttnKind::Linear:
      return linear;
  }
  throw InvalidArgument(str("unknown attention variant kind ", static_cast<int>(k)));
}

// deque: entries keep their addresses while others are added
std::deque<VariantEntry>& registered() {
  static std::deque<VariantEntry> r;
  return r;
}

}  // namespace

bool is_registered_variant(AttnKind k) { return static_cast<int>(k) >= kFirstRegistered; }

const VariantEntry& attention_variant(AttnKind k) {
  if (!is_registered_variant(k)) return built_in(k);
  const std::size_t i = static_cast<std::size_t>(static_cast<int>(k) - kFirstRegistered);
  require(i < registered().size(), "unknown attention variant kind ", static_cast<int>(k));
  return registered()[i];
}

bool find_registered_variant(const std::string& s, AttnKind& out) {
  const auto& r = registered();
  for (std::size_t i = 0; i < r.size(); ++i)
    if (r[i].name == s || std::find(r[i].aliases.begin(), r[i].aliases.end(), s) != r[i].aliases.end()) {
      out = static_cast<AttnKind>(kFirstRegistered + static_cast<int>(i));
      return true;
    }
  return false;
}

AttnKind register_attention_variant(VariantEntry entry) {
  require(!entry.name.empty() && entry.params && entry.f32.forward && entry.f64.forward,
          "register_attention_variant: an entry needs a name, a parameter block and its kernels "
          "(cf::nn::detail::make_variant_entry)");
  require(!entry.gpu.trainer || entry.gpu.form != GpuForm::None, "register_attention_variant: '", entry.name,
          "' says the device trainer runs it (GpuHook::trainer) but names no kernel form (GpuHook::form)");
  std::vector<std::string> names = entry.aliases;
  names.push_back(entry.name);
  for (const std::string& n : names) {
    AttnKind k;
    bool taken = find_registered_variant(n, k);
    if (!taken) try {
        parse_attn_kind(n);
        taken = true;
      } catch (const InvalidArgument&) {
      }
    require(!taken, "register_attention_variant: the name '", n, "' is taken");
  }
  registered().push_back(std::move(entry));
  return static_cast<AttnKind>(kFirstRegistered + static_cast<int>(registered().size()) - 1);
}

std::vector<VariantParam> variant_params(const ModelConfig& c, int l) {
  return attention_variant(c.layers.at(static_cast<std::size_t>(l)).attn).params(c, l);
}

}  // namespace cf::nn
