#include "cf/probe/boundary_copy.hpp"

#include <algorithm>
#include <climits>
#include <limits>
#include <random>
#include <set>

#include "cf/core/error.hpp"

namespace cf::probe {

namespace {
// An integer of task metadata in [lo, hi]: nlohmann's get<int>() wraps 1e12 or 2^40 silently, and
// a 16-bit data::Token reads an alphabet id 65604 as 68 (the checks after it would then name a
// value the file does not hold). `key` names the field, key[i] for list elements.
std::int64_t int_value(const nlohmann::json& v, const std::string& key, std::int64_t lo, std::int64_t hi) {
  bool ok = false;
  if (v.is_number_unsigned())  // hi <= INT64_MAX: a value <= hi converts exactly
    ok = v.get<std::uint64_t>() <= static_cast<std::uint64_t>(hi) &&
         static_cast<std::int64_t>(v.get<std::uint64_t>()) >= lo;
  else if (v.is_number_integer())
    ok = v.get<std::int64_t>() >= lo && v.get<std::int64_t>() <= hi;
  require(ok, "boundary-copy task metadata: field '", key, "' must be an integer in [", lo, ", ", hi, "] (got ",
          v.dump(), ")");
  return v.get<std::int64_t>();
}
int int_field(const nlohmann::json& j, const char* key) {
  return static_cast<int>(int_value(j.at(key), key, INT_MIN, INT_MAX));
}
template <class T>
std::vector<T> int_list_field(const nlohmann::json& j, const char* key, std::int64_t lo, std::int64_t hi) {
  const nlohmann::json& a = j.at(key);
  require(a.is_array(), "boundary-copy task metadata: field '", key, "' must be a list of integers");
  std::vector<T> out;
  for (std::size_t i = 0; i < a.size(); ++i)
    out.push_back(static_cast<T>(int_value(a[i], std::string(key) + "[" + std::to_string(i) + "]", lo, hi)));
  return out;
}

std::mt19937_64 row_rng(std::uint64_t seed, std::uint64_t row) {
  std::seed_seq seq{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32),
                    static_cast<std::uint32_t>(row), static_cast<std::uint32_t>(row >> 32), 0xB0C0u};
  return std::mt19937_64(seq);
}
}  // namespace

void validate(const BoundaryCopySpec& s) {
  require(s.K >= 2, "--K must be >= 2 (got ", s.K, "): a 1-way copy has nothing to guess");
  require(s.seq_len >= 2 && s.seq_len <= 65536, "--seq-len must be in [2, 65536] (got ", s.seq_len, ")");
  // A block longer than the row has no boundary inside it (every phase r = p mod b is p), and each
  // row's phase table has b entries: b = 2^31 would run for hours.
  require(s.b >= 1 && s.b <= s.seq_len, "--b must be in [1, seq_len = ", s.seq_len, "] (got ", s.b, ")");
  require(s.d >= 1 && s.d <= s.seq_len - 2, "--distance d must be in [1, seq_len - 2 = ", s.seq_len - 2, "] (got ", s.d,
          ")");
  require(s.readout_rate > 0 && s.readout_rate <= 1, "--readout-rate must lie in (0, 1] (got ", s.readout_rate, ")");
  for (int r : s.phases) require(r >= 0 && r < s.b, "--phases: phase ", r, " outside [0, b = ", s.b, ")");
  require(static_cast<int>(s.alphabet.size()) == s.K, "alphabet has ", s.alphabet.size(), " tokens but K = ", s.K);
  std::set<data::Token> u(s.alphabet.begin(), s.alphabet.end());
  require(u.size() == s.alphabet.size(), "alphabet tokens must be distinct");
  require(s.vocab_size >= 2, "vocab_size must be >= 2 (got ", s.vocab_size, ")");
  for (auto t : s.alphabet) require(int(t) < s.vocab_size, "alphabet token ", t, " >= vocab_size ", s.vocab_size);
  for (auto t : s.filler) require(int(t) < s.vocab_size, "filler token ", t, " >= vocab_size ", s.vocab_size);
  require(s.filler.empty() || s.filler.size() > static_cast<std::size_t>(s.seq_len) + 1, "filler stream has ",
          s.filler.size(), " tokens, fewer than a row (", s.seq_len + 1, ")");
}

std::vector<int> choose_readouts(const BoundaryCopySpec& s, std::uint64_t row_seed) {
  auto rng = row_rng(s.seed, row_seed);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  std::vector<char> scored(static_cast<std::size_t>(s.b), s.phases.empty() ? 1 : 0);
  for (int r : s.phases) scored[static_cast<std::size_t>(r)] = 1;
  std::vector<char> is_target(static_cast<std::size_t>(s.seq_len) + 1, 0);
  std::vector<int> out;
  for (int p = s.d; p <= s.seq_len - 1; ++p) {
    const double coin = u01(rng);  // drawn for every p, so the choice at p does not shift later draws
    if (!scored[static_cast<std::size_t>(p % s.b)] || is_target[static_cast<std::size_t>(p - s.d)]) continue;
    if (coin >= s.readout_rate) continue;
    out.push_back(p);
    is_target[static_cast<std::size_t>(p + 1)] = 1;
  }
  return out;
}

data::TaskSplit generate_boundary_copy(const BoundaryCopySpec& s, int rows, std::uint64_t first_row) {
  validate(s);
  require(rows >= 1, "rows must be >= 1 (got ", rows, ")");
  const int L = s.seq_len + 1;
  data::TaskSplit out;
  out.tokens.resize(static_cast<std::size_t>(rows) * L);
  out.mask.assign(out.tokens.size(), 0);
  for (int i = 0; i < rows; ++i) {
    const std::uint64_t row = first_row + static_cast<std::uint64_t>(i);
    const std::vector<int> ro = choose_readouts(s, row);
    auto rng = row_rng(s.seed ^ 0x9E3779B97F4A7C15ull, row);
    std::uniform_int_distribution<int> pickK(0, s.K - 1);
    data::Token* t = out.tokens.data() + static_cast<std::size_t>(i) * L;
    std::uint8_t* m = out.mask.data() + static_cast<std::size_t>(i) * L;
    if (s.filler.empty()) {
      for (int j = 0; j < L; ++j) t[j] = s.alphabet[static_cast<std::size_t>(pickK(rng))];
    } else {
      std::uniform_int_distribution<std::size_t> off(0, s.filler.size() - static_cast<std::size_t>(L));
      const std::size_t o = off(rng);
      for (int j = 0; j < L; ++j) t[j] = s.filler[o + static_cast<std::size_t>(j)];
    }
    // labels: fresh uniform draws at the sources, copied to the targets (left to right)
    for (int p : ro) {
      t[p - s.d] = s.alphabet[static_cast<std::size_t>(pickK(rng))];
      t[p + 1] = t[p - s.d];
      m[p + 1] = 1;
    }
  }
  return out;
}

nlohmann::json describe(const BoundaryCopySpec& s, const std::string& filler_name) {
  return {{"name", "boundary-copy"},
          {"K", s.K},
          {"d", s.d},
          {"b", s.b},
          {"seq_len", s.seq_len},
          {"phases", s.phases},
          {"readout_rate", s.readout_rate},
          {"alphabet", s.alphabet},
          {"filler", filler_name},
          {"seed", s.seed}};
}

BoundaryCopySpec boundary_copy_from_json(const nlohmann::json& j) {
  try {
    require(j.value("name", std::string()) == "boundary-copy", "task is '", j.value("name", std::string("?")),
            "', not boundary-copy");
    BoundaryCopySpec s;
    s.K = int_field(j, "K");
    s.d = int_field(j, "d");
    s.b = int_field(j, "b");
    s.seq_len = int_field(j, "seq_len");
    s.phases = int_list_field<int>(j, "phases", INT_MIN, INT_MAX);
    s.readout_rate = j.at("readout_rate").get<double>();
    s.alphabet = int_list_field<data::Token>(j, "alphabet", 0, std::numeric_limits<data::Token>::max());
    const nlohmann::json& seed = j.at("seed");
    require(seed.is_number_unsigned() || (seed.is_number_integer() && seed.get<std::int64_t>() >= 0),
            "boundary-copy task metadata: field 'seed' must be an integer >= 0 (got ", seed.dump(), ")");
    s.seed = seed.get<std::uint64_t>();
    return s;
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(str("malformed boundary-copy task metadata: ", e.what()));
  }
}

graph::Schedule model_schedule(const nn::ModelConfig& c) {
  graph::Schedule s;
  for (const auto& lc : c.layers) {
    graph::Pattern p;
    p.b = lc.b;
    p.w = lc.w;
    p.e = lc.e;
    switch (lc.attn) {
      case nn::AttnKind::Block:
        p.kind = graph::PatternKind::Block;
        break;
      case nn::AttnKind::Swa:
        p.kind = graph::PatternKind::Swa;
        break;
      case nn::AttnKind::Bridge:
        p.kind = graph::PatternKind::Bridge;
        break;
      case nn::AttnKind::Pbb:
        p.kind = graph::PatternKind::Pbb;
        break;
      case nn::AttnKind::SeBridge:
        p.kind = graph::PatternKind::SeBridge;
        break;
      default:
        p.kind = graph::PatternKind::Full;
        break;
    }
    s.layers.push_back(p);
  }
  return s;
}

}  // namespace cf::probe
