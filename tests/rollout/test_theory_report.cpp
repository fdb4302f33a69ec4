// cf/rollout/theory_report.hpp: the random kernels of `rollout verify` are causal, row-stochastic
// and stochastically monotone (checked entry by entry here), verify passes on the bloom preset, and
// the dichotomy report's rows agree with cf::rollout::dichotomy called directly.
#include <catch2/catch.hpp>

#include "cf/core/error.hpp"
#include "cf/rollout/dichotomy.hpp"
#include "cf/rollout/theory_report.hpp"

using namespace cf::rollout;

TEST_CASE("random_monotone_kernels are causal, row-stochastic and stochastically monotone", "[rollout][theory]") {
  std::mt19937_64 rng(7);
  const long n = 24;
  const auto ks = random_monotone_kernels(rng, 4, n);
  REQUIRE(ks.size() == 4);
  for (const RowMatrix& K : ks) {
    REQUIRE(K.rows() == n);
    REQUIRE(K.cols() == n);
    for (long i = 0; i < n; ++i) {
      double sum = 0;
      for (long j = 0; j < n; ++j) {
        if (j > i) CHECK(K(i, j) == 0.0);
        CHECK(K(i, j) >= 0.0);
        sum += K(i, j);
      }
      CHECK(sum == Approx(1.0).epsilon(1e-12));
    }
    // Stochastic monotonicity: a later row puts no more mass on any prefix [0, k] than an earlier row.
    for (long i = 0; i + 1 < n; ++i) {
      double a = 0, b = 0;
      for (long k = 0; k < n; ++k) {
        a += K(i, k);
        b += K(i + 1, k);
        CHECK(b <= a + 1e-12);
      }
    }
  }
}

TEST_CASE("verify_report holds on the bloom preset and refuses dense sources", "[rollout][theory]") {
  SourceOptions o;
  o.model = "bloom";
  o.n = 16;
  const RolloutSource s = make_source(o, 16);
  const VerifyOutcome v = verify_report(s, 1);
  CHECK(v.all_ok);
  REQUIRE(v.report.tables.size() == 1);
  CHECK(v.report.tables[0].rows.size() == 8);  // 5 model checks + 2 per seed + structured vs dense
  CHECK(v.report.body["all_ok"] == true);
  RolloutSource dense = s;
  dense.structured = false;
  CHECK_THROWS_AS(verify_report(dense, 1), cf::InvalidArgument);
}

TEST_CASE("dichotomy_report rows are cf::rollout::dichotomy at depths 10, 100, ..., depth", "[rollout][theory]") {
  SourceOptions o;
  o.model = "bloom";
  o.n = 4;
  const RolloutSource s = make_source(o, 4);
  const RowMatrix K = source_kernels(s, false)[0];
  const std::vector<AlphaSpec> specs = {parse_alpha_spec("const:0.5")};
  const DichotomyOutcome d = dichotomy_report(K, specs, s.name, 250, 0);
  const auto& rows = d.report.body["rows"];
  REQUIRE(rows.size() == 3);  // 10, 100, 250
  const long depths[] = {10, 100, 250};
  for (int r = 0; r < 3; ++r) {
    const DichotomyResult ref = dichotomy(
        K, [](long) { return 0.5; }, depths[r], K.rows() - 1, 0);
    CHECK(rows[r]["depth"] == depths[r]);
    CHECK(rows[r]["self_mass"] == ref.self_mass);
    CHECK(rows[r]["off_zero_mass"] == ref.off_zero_mass);
    CHECK(rows[r]["holds"] == (ref.holds_i && ref.holds_ii));
  }
  CHECK(d.all_hold);
}
