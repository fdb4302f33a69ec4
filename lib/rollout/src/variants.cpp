// Rollout variants (a), (b), (c) (cf/rollout/variants.hpp) and context sweeps (cf/rollout/sweep.hpp).
#include "cf/rollout/variants.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "cf/core/error.hpp"
#include "cf/core/output.hpp"
#include "cf/rollout/agreement.hpp"
#include "cf/rollout/rollout.hpp"
#include "cf/rollout/sweep.hpp"

namespace cf::rollout {

Eigen::VectorXd rollout_profile(const RolloutSource& s, const Eigen::VectorXd& alpha, bool content, long n, bool dense,
                                const LastRowBackend* backend) {
  if (!s.structured) {
    require(n == s.n, "rollout: kernels from a file or capture fix n = ", s.n, ", got n = ", n);
    require(n <= kDenseMaxN, "n = ", n, " is too large for the dense path (n <= ", kDenseMaxN,
            ") and kernels from a file or capture have no structured path");
    if (backend) {
      require(s.kernels.size() == 1 || static_cast<long>(s.kernels.size()) == alpha.size(),
              "rollout: ", s.kernels.size(), " kernels for L = ", alpha.size(), " layers (need 1 or L)");
      return backend->dense([&](int l) { return s.kernels.size() == 1 ? s.kernels[0] : s.kernels[l]; }, alpha, n);
    }
    return rollout_last_row_dense(s.kernels, alpha);
  }
  AlibiModel m = s.base;
  if (content) m.delta = s.delta;
  if (dense) {
    require(n <= kDenseMaxN, "--path dense needs --n <= ", kDenseMaxN, ", got ", n);
    if (backend) {
      validate_model(m);
      return backend->dense([&](int l) { return alibi_kernel_dense(m, l, n); }, alpha, n);
    }
    return rollout_last_row_alibi_dense(m, alpha, n);
  }
  return backend ? backend->alibi(m, alpha, n) : rollout_last_row_alibi(m, alpha, n);
}

std::vector<VariantProfile> rollout_variants(const RolloutSource& s, long n, bool dense,
                                             const LastRowBackend* backend) {
  if (n == 0) n = s.n;
  std::vector<VariantProfile> vs;
  auto timed = [&](const std::string& key, const std::string& label, const Eigen::VectorXd& a, bool content) {
    const auto t0 = std::chrono::steady_clock::now();
    Eigen::VectorXd p = rollout_profile(s, a, content, n, dense, backend);
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    vs.push_back({key, label, std::move(p), sec});
  };
  timed("attention_only", "(a) attention-only", Eigen::VectorXd::Ones(s.L), false);
  timed("residual", "(b) residual-aware", s.alpha, false);
  if (s.structured && s.delta.size() > 0) timed("residual_content", "(c) residual + content", s.alpha, true);
  return vs;
}

std::vector<long> parse_n_list(const std::string& spec, const std::string& option) {
  constexpr long kMax = 1L << 26;
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    const auto comma = spec.find(',', start);
    parts.push_back(spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  auto number = [&](const std::string& t) {
    char* end = nullptr;
    errno = 0;
    const long v = std::strtol(t.c_str(), &end, 10);
    require(!t.empty() && end && *end == '\0' && errno != ERANGE && v >= 1 && v <= kMax, option, ": '", t,
            "' is not an integer in [1, 2^26] (list: n1,n2,... or a,b,...,c)");
    return v;
  };
  std::vector<long> ns;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (parts[i] != "...") {
      ns.push_back(number(parts[i]));
      continue;
    }
    require(ns.size() >= 2 && i + 1 < parts.size() && parts[i + 1] != "...", option,
            ": '...' needs two values before it and one after (e.g. 64,128,...,65536), got '", spec, "'");
    const long a = ns[ns.size() - 2], b = ns.back(), c = number(parts[i + 1]);
    require(b > a && c >= b, option, ": '", a, ",", b, ",...,", c, "' must increase");
    const bool geometric = b % a == 0 && b / a >= 2;
    long x = b;
    while (true) {
      const long next = geometric ? (x > kMax / (b / a) ? kMax + 1 : x * (b / a)) : x + (b - a);
      if (next > c) break;
      ns.push_back(next);
      x = next;
      require(ns.size() <= 4096, option, ": more than 4096 values");
    }
    require(x == c, option, ": ", c, " is not on the progression ", a, ", ", b, ", ... (",
            geometric ? "ratio " : "step ", geometric ? b / a : b - a, ")");
    ++i;  // c consumed
  }
  require(!ns.empty(), option, ": no values in '", spec, "'");
  require(ns.size() <= 4096, option, ": more than 4096 values");
  for (std::size_t i = 1; i < ns.size(); ++i)
    require(ns[i] > ns[i - 1], option, ": values must increase strictly, got ", ns[i - 1], " then ", ns[i]);
  return ns;
}

std::vector<SweepRow> sweep_context(const RolloutSource& s, const std::vector<long>& ns,
                                    const LastRowBackend* backend) {
  require(s.structured,
          "sweep needs a structured ALiBi model (a preset, --model-config or an ALiBi checkpoint); "
          "kernels from a file or capture fix n = T");
  require(!ns.empty(), "sweep: no sequence lengths");
  std::vector<std::vector<SweepRow>> by_n;
  for (long n : ns) {
    std::vector<SweepRow> rows;
    for (const auto& v : rollout_variants(s, n, false, backend))
      rows.push_back({v.key, v.label, n, summarize(v.p), v.seconds});
    by_n.push_back(rows);
  }
  std::vector<SweepRow> out;
  for (std::size_t k = 0; k < by_n[0].size(); ++k)
    for (const auto& rows : by_n) out.push_back(rows[k]);
  return out;
}

plot::LinePlot sweep_plot(const std::vector<SweepRow>& rows, const std::string& name) {
  plot::LinePlot lp;
  lp.xlabel = "log2 n (context length)";
  lp.ylabel = "mass of the last row";
  lp.log_y = true;
  lp.key = "below";  // nine curves
  double top = 0;
  for (const std::string what : {"p_0", "primacy", "recency"})
    for (const auto& r : rows) {
      const double y = what == "p_0" ? r.summary.first : what == "primacy" ? r.summary.primacy : r.summary.recency;
      if (!(y > 0)) continue;                           // log axis
      const std::string label = r.label + ": " + what;  // the display name the tables use
      auto it =
          std::find_if(lp.series.begin(), lp.series.end(), [&](const plot::Series& x) { return x.label == label; });
      if (it == lp.series.end()) {
        plot::Series se{label, {}, {}};
        se.colour = r.key == "attention_only" ? 0 : r.key == "residual" ? 1 : 2;
        se.dash_type = what == "p_0" ? 0 : what == "primacy" ? 2 : 3;
        it = lp.series.insert(lp.series.end(), se);
      }
      it->x.push_back(std::log2(static_cast<double>(r.n)));
      it->y.push_back(y);
      top = std::max(top, y);
    }
  // masses fall to 1e-110 and below: the informative range is 12 decades under the largest, the
  // rest clipped at the frame (the title names those curves)
  if (top > 0) lp.y_min = top * 1e-12, lp.y_max = std::min(1.0, top) * 2;
  lp.title = "Last-row rollout against context length, " + name + " (y from 1e-12 x the largest mass)";
  return lp;
}

std::pair<std::vector<std::string>, nlohmann::json> variant_summary_row(const std::string& label,
                                                                        const Eigen::VectorXd& p, double seconds,
                                                                        const Eigen::VectorXd& influence) {
  using output::fmt;
  const auto sm = summarize(p);
  std::vector<std::string> row = {label,          fmt(sm.first, 4),   fmt(sm.last, 4),    output::fmt_int(sm.argmin),
                                  fmt(sm.min, 4), fmt(sm.primacy, 4), fmt(sm.recency, 4), fmt(seconds, 3)};
  nlohmann::json js = {{"p_first", sm.first}, {"p_last", sm.last},          {"argmin", sm.argmin},
                       {"min", sm.min},       {"primacy_mass", sm.primacy}, {"recency_mass", sm.recency},
                       {"seconds", seconds}};
  if (influence.size()) {
    require(influence.size() == p.size(), "variant summary: influence has ", influence.size(), " positions but the ",
            "profile ", p.size());
    const double rho = spearman(p, influence), w1 = wasserstein1_normalised(p, influence);
    row.push_back(fmt(rho, 4));
    row.push_back(fmt(w1, 4));
    js["spearman"] = rho;
    js["w1_normalised"] = w1;
  }
  return {row, js};
}

}  // namespace cf::rollout
