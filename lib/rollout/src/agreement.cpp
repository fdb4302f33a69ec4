#include "cf/rollout/agreement.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "cf/core/error.hpp"
#include "cf/core/number_file.hpp"

namespace cf::rollout {

namespace {
Eigen::VectorXd average_ranks(const Eigen::VectorXd& x) {
  const long n = x.size();
  std::vector<long> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](long a, long b) { return x(a) < x(b); });
  Eigen::VectorXd r(n);
  for (long i = 0; i < n;) {
    long j = i;
    while (j + 1 < n && x(idx[j + 1]) == x(idx[i])) ++j;
    for (long k = i; k <= j; ++k) r(idx[k]) = 0.5 * (i + j);
    i = j + 1;
  }
  return r;
}
}  // namespace

double spearman(const Eigen::VectorXd& x, const Eigen::VectorXd& y) {
  require(x.size() == y.size() && x.size() >= 2, "spearman: equal lengths n >= 2 required, got ", x.size(), " and ",
          y.size());
  Eigen::VectorXd rx = average_ranks(x), ry = average_ranks(y);
  rx.array() -= rx.mean();
  ry.array() -= ry.mean();
  const double den = std::sqrt(rx.squaredNorm() * ry.squaredNorm());
  return den > 0 ? rx.dot(ry) / den : 0.0;
}

double wasserstein1_normalised(const Eigen::VectorXd& a, const Eigen::VectorXd& b) {
  require(a.size() == b.size() && a.size() >= 2, "W1: equal lengths n >= 2 required, got ", a.size(), " and ",
          b.size());
  const double sa = a.sum(), sb = b.sum();
  require(sa > 0 && sb > 0 && (a.array() >= 0).all() && (b.array() >= 0).all(),
          "W1: both inputs must be non-negative with a positive sum");
  double ca = 0, cb = 0, w = 0;
  for (long k = 0; k < a.size(); ++k) {
    ca += a(k) / sa;
    cb += b(k) / sb;
    w += std::abs(ca - cb);
  }
  return w / static_cast<double>(a.size() - 1);
}

Eigen::VectorXd read_influence_file(const std::string& path) {
  std::vector<double> v;
  for (const auto& row : read_number_rows(path, "influence file")) {
    if (row.size() == 2 && row[0] == static_cast<double>(v.size()))
      v.push_back(row[1]);  // "position,value"
    else
      v.insert(v.end(), row.begin(), row.end());
  }
  require(v.size() >= 2, "influence file '", path, "': at least 2 values required, got ", v.size());
  Eigen::VectorXd p = Eigen::Map<Eigen::VectorXd>(v.data(), static_cast<long>(v.size()));
  require((p.array() >= 0).all() && p.sum() > 0, "influence file '", path,
          "': values must be non-negative with a positive sum");
  return p / p.sum();
}

}  // namespace cf::rollout
