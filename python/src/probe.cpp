// causalflow.probe: the paired statistics of the probes (Boundary repair (Yang), Section 5 and Prop. 3):
// binomial tails, the exact binomial test against a coverage bound, the exact McNemar test and the
// paired percentile bootstrap. Every function calls lib/probe (cf/probe/stats.hpp).
#include "cf/core/error.hpp"
#include "cf/graph/bounds.hpp"
#include "cf/probe/stats.hpp"
#include "convert.hpp"

namespace cfpy {

using namespace cf::probe;

namespace {
py::dict mcnemar_dict(const McNemarResult& r) {
  py::dict d;
  d["n01"] = r.n01;
  d["n10"] = r.n10;
  d["p_value"] = r.p_value;
  d["log10_p"] = r.log10_p;
  return d;
}

std::vector<std::uint8_t> outcomes(const py::handle& a, const std::string& what) {
  const Eigen::VectorXd v = to_vector(a, what);
  std::vector<std::uint8_t> out(v.size());
  for (Eigen::Index i = 0; i < v.size(); ++i) {
    cf::require(v(i) == 0 || v(i) == 1, what, "[", i, "] must be 0 or 1 (got ", v(i), ")");
    out[i] = static_cast<std::uint8_t>(v(i));
  }
  return out;
}
}  // namespace

void bind_probe(py::module_& m) {
  m.doc() =
      "Statistics of the probe results (Boundary repair (Yang), Section 5): exact binomial tails and test against\n"
      "the coverage bound of Prop. 3, the exact two-sided McNemar test, the paired percentile bootstrap, and the\n"
      "accuracy bounds (Theorem 2, Prop. 3).";
  m.def("binomial_upper_tail", &binomial_upper_tail, py::arg("k"), py::arg("n"), py::arg("p"),
        "P(X >= k) for X ~ Binomial(n, p), summed in log space (accurate to ~1e-12 relative for n up to ~1e7).");
  m.def("binomial_lower_tail", &binomial_lower_tail, py::arg("k"), py::arg("n"), py::arg("p"),
        "P(X <= k) for X ~ Binomial(n, p).");
  m.def("binomial_test_above", &binomial_test_above, py::arg("correct"), py::arg("n"), py::arg("bound"),
        "One-sided exact binomial test of H0: accuracy <= bound (e.g. Prop. 3's pi + (1 - pi)/K) against\n"
        "H1: accuracy > bound, with `correct` successes out of n: p = P(X >= correct | n, bound).");
  m.def(
      "mcnemar", [](std::int64_t n01, std::int64_t n10) { return mcnemar_dict(mcnemar_exact(n01, n10)); },
      py::arg("n01"), py::arg("n10"),
      "Exact two-sided McNemar test on the discordant counts n01 (first right, second wrong) and n10:\n"
      "p = min(1, 2 P(X <= min(n01, n10))), X ~ Binomial(n01 + n10, 1/2). Returns {'n01', 'n10', 'p_value',\n"
      "'log10_p'} (log10_p stays finite where p underflows).");
  m.def(
      "mcnemar_outcomes",
      [](const py::handle& a, const py::handle& b) {
        return mcnemar_dict(mcnemar_exact(outcomes(a, "a"), outcomes(b, "b")));
      },
      py::arg("a"), py::arg("b"),
      "McNemar on per-item 0/1 outcomes of two classifiers (same items, same order; arrays of shape (N,)).");
  m.def(
      "paired_bootstrap",
      [](const py::handle& a, const py::handle& b, int resamples, double level, std::uint64_t seed) {
        const Eigen::VectorXd va = to_vector(a, "a"), vb = to_vector(b, "b");
        const std::vector<double> xa(va.data(), va.data() + va.size()), xb(vb.data(), vb.data() + vb.size());
        BootstrapCi ci;
        {
          py::gil_scoped_release nogil;
          ci = paired_bootstrap_ci(xa, xb, resamples, level, seed);
        }
        py::dict d;
        d["estimate"] = ci.estimate;
        d["lo"] = ci.lo;
        d["hi"] = ci.hi;
        d["level"] = ci.level;
        d["resamples"] = ci.resamples;
        d["seed"] = ci.seed;
        return d;
      },
      py::arg("a"), py::arg("b"), py::arg("resamples") = 10000, py::arg("level") = 0.95, py::arg("seed") = 1,
      "Paired percentile bootstrap interval for mean(a) - mean(b) (accuracy difference of two classifiers on\n"
      "the same N items): resamples of the items with replacement (mt19937_64 seeded with `seed`), the\n"
      "(1-level)/2 and (1+level)/2 quantiles. Returns {'estimate', 'lo', 'hi', 'level', 'resamples', 'seed'}.");
  m.def(
      "coverage_limited_bound",
      [](double pi, int K) {
        const auto b = cf::graph::coverage_limited_bound(pi, K);
        return py::make_tuple(b.accuracy_max, b.cross_entropy_min);
      },
      py::arg("pi"), py::arg("K"),
      "Prop. 3 of Boundary repair (Yang): (accuracy_max, cross_entropy_min) = (pi + (1 - pi)/K, (1 - pi) log K).");
}

}  // namespace cfpy
