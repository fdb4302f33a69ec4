// Limits that keep every count of lib/graph inside int64 (issue 9: UBSan signed overflow in
// num_blocks, the coverage matrix size check and the schedule score sums). Each case checks
// the refusal and, where a value is accepted, the count against a closed form in long double.
#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>

#include "cf/core/error.hpp"
#include "cf/graph/coverage.hpp"
#include "cf/graph/mask.hpp"
#include "cf/graph/schedule.hpp"
#include "cf/graph/scores.hpp"

using namespace cf::graph;

TEST_CASE("validate bounds n, b, w, e by 2^31 so that n(n+1)/2 fits in int64", "[issue9]") {
  Pattern p;
  p.kind = PatternKind::Full;
  CHECK_NOTHROW(validate(p, kMaxLength));
  CHECK_THROWS_AS(validate(p, kMaxLength + 1), cf::InvalidArgument);
  p.b = std::numeric_limits<Index>::max();  // num_blocks computed n + b - 1 here before
  CHECK_THROWS_AS(validate(p, 1024), cf::InvalidArgument);
  CHECK_THROWS_AS(num_blocks(Mask{p, 1024}), cf::InvalidArgument);
  p.b = 128;
  p.kind = PatternKind::Swa;
  p.w = kMaxLength + 1;
  CHECK_THROWS_AS(validate(p, 1024), cf::InvalidArgument);
  // The largest full mask: n(n+1)/2 = 2^30 (2^31 + 1) exactly, no overflow.
  p.kind = PatternKind::Full;
  p.w = 128;
  const long double n = static_cast<long double>(kMaxLength);
  CHECK(static_cast<long double>(scores_branch(Mask{p, kMaxLength})) == n * (n + 1) / 2);
}

TEST_CASE("coverage matrix size check does not overflow for any d_max", "[issue9]") {
  Pattern p;
  p.kind = PatternKind::Block;
  p.b = 128;
  CHECK_THROWS_AS(coverage_matrix_closed_form(p, std::numeric_limits<Index>::max()), cf::InvalidArgument);
  CHECK_THROWS_AS(coverage_matrix_closed_form(p, (Index(1) << 31) - 1), cf::InvalidArgument);
  p.b = (Index(1) << 31);
  CHECK_THROWS_AS(coverage_matrix_closed_form(p, (Index(1) << 30)), cf::InvalidArgument);
  p.b = 8;
  CHECK(coverage_matrix_closed_form(p, 15).rows() == 16);
}

TEST_CASE("schedule score sums are checked: 10^6 full layers at n = 2^26 overflow int64", "[issue9]") {
  Pattern p;
  p.kind = PatternKind::Full;
  // Each layer has 2^25 (2^26 + 1) ~ 2^51 scores; 2^12 layers pass 2^63.
  CHECK_THROWS_AS(scores_schedule(uniform_schedule(p, 1000000), Index(1) << 26), cf::InvalidArgument);
  // 1,000 layers fit: exactly 1000 n(n+1)/2.
  const Index n = Index(1) << 26;
  const ScheduleScores s = scores_schedule(uniform_schedule(p, 1000), n);
  CHECK(s.branch == 1000 * (n * (n + 1) / 2));
  CHECK(s.unions == s.branch);
}
