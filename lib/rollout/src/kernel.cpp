#include "cf/rollout/kernel.hpp"

#include <cerrno>
#include <cmath>

#include "cf/core/error.hpp"
#include "cf/core/number_file.hpp"
#include "cf/rollout/detail/flush_denormals.hpp"

namespace cf::rollout {

std::string Mask::name() const { return window > 0 ? "swa:" + std::to_string(window) : "causal"; }

Mask parse_mask(const std::string& spec) {
  if (spec == "causal") return Mask{};
  if (spec.rfind("swa:", 0) == 0) {
    const std::string w = spec.substr(4);
    char* end = nullptr;
    errno = 0;
    const long v = std::strtol(w.c_str(), &end, 10);
    require(!w.empty() && end && *end == '\0' && errno != ERANGE && v >= 1 && v <= (1L << 40),
            "mask: swa:W needs an integer W in [1, 2^40], got '", spec, "'");
    return Mask{v};
  }
  throw InvalidArgument(str("mask: expected 'causal' or 'swa:W', got '", spec, "'"));
}

double model_delta(const AlibiModel& m, int l, int h) {
  if (m.delta.size() == 0) return 0.0;
  const int r = m.delta.rows() == 1 ? 0 : l;
  const int c = m.delta.cols() == 1 ? 0 : h;
  return m.delta(r, c);
}

namespace {
std::vector<double> normalised_weights(const std::vector<double>& hw, int H) {
  if (hw.empty()) return std::vector<double>(H, 1.0 / H);
  require(static_cast<int>(hw.size()) == H, "head weights: need H = ", H, " weights, got ", hw.size());
  double sum = 0;
  for (double w : hw) {
    require(std::isfinite(w) && w >= 0, "head weights: every weight must be finite and >= 0, got ", w);
    sum += w;
  }
  require(sum > 0 && std::isfinite(sum), "head weights: sum must be finite and > 0");
  std::vector<double> w = hw;
  for (double& x : w) x /= sum;
  return w;
}
}  // namespace

std::vector<double> model_head_weights(const AlibiModel& m) {
  return normalised_weights(m.head_weights, static_cast<int>(m.slopes.size()));
}

std::vector<double> model_head_weights(const AlibiModel& m, int l) {
  if (m.layer_head_weights.empty()) return model_head_weights(m);
  require(l >= 0 && l < static_cast<int>(m.layer_head_weights.size()), "head weights: layer ", l + 1,
          " has no weights (", m.layer_head_weights.size(), " layers given)");
  return normalised_weights(m.layer_head_weights[l], static_cast<int>(m.slopes.size()));
}

const std::vector<double>& model_slopes(const AlibiModel& m, int l) {
  if (m.layer_slopes.empty()) return m.slopes;
  require(l >= 0 && l < static_cast<int>(m.layer_slopes.size()), "slopes: layer ", l + 1, " has no slopes (",
          m.layer_slopes.size(), " layers given)");
  return m.layer_slopes[l];
}

bool same_layer_kernel(const AlibiModel& m, int l1, int l2) {
  if (l1 == l2) return true;
  for (int h = 0; h < static_cast<int>(m.slopes.size()); ++h)
    if (model_delta(m, l1, h) != model_delta(m, l2, h)) return false;
  if (!m.layer_slopes.empty() && m.layer_slopes[l1] != m.layer_slopes[l2]) return false;
  if (!m.layer_head_weights.empty() && m.layer_head_weights[l1] != m.layer_head_weights[l2]) return false;
  return true;
}

void validate_model(const AlibiModel& m) {
  require(!m.slopes.empty(), "model: at least one head (slope) required");
  for (double s : m.slopes) require(std::isfinite(s) && s >= 0, "model: ALiBi slopes must be finite and >= 0, got ", s);
  const int H = static_cast<int>(m.slopes.size());
  for (std::size_t l = 0; l < m.layer_slopes.size(); ++l) {
    require(static_cast<int>(m.layer_slopes[l].size()) == H, "model: layer ", l + 1, " has ", m.layer_slopes[l].size(),
            " slopes, expected H = ", H);
    for (double s : m.layer_slopes[l])
      require(std::isfinite(s) && s >= 0, "model: ALiBi slopes must be finite and >= 0, got ", s, " in layer ", l + 1);
  }
  for (std::size_t l = 0; l < m.layer_head_weights.size(); ++l) model_head_weights(m, static_cast<int>(l));
  if (!m.layer_slopes.empty() && !m.layer_head_weights.empty())
    require(m.layer_slopes.size() == m.layer_head_weights.size(), "model: per-layer slopes (", m.layer_slopes.size(),
            " layers) and head weights (", m.layer_head_weights.size(), " layers) differ in L");
  if (m.delta.size() > 0) {
    require(m.delta.cols() == 1 || m.delta.cols() == H, "model: delta must have 1 or H = ", H, " columns, got ",
            m.delta.cols());
    require(m.delta.allFinite(), "model: delta (diagonal content) must be finite");
  }
  require(m.mask.window >= 0, "model: window must be >= 0, got ", m.mask.window);
  model_head_weights(m);
}

namespace {
// A += w * A(slope, delta): each row's weights come from a table of exp(-slope d - shift) with
// d = i - j, computed by exp() per distance (independent of the fast path's recurrences).
void add_head_dense(RowMatrix& A, double w, double slope, double delta, const Mask& mask) {
  const long n = A.rows();
  // Logits -slope d (d >= 1) and delta (d = 0) are shifted by their maximum so that exp() never
  // overflows and the largest weight is 1; a row with one admitted key puts all weight on it.
  const double shift = std::max(delta, -slope);
  std::vector<double> e(n, 0.0), prefix(n + 1, 0.0);  // prefix[k] = sum_{1<=d<k} e[d]
  for (long d = 1; d < n; ++d) e[d] = std::exp(-slope * static_cast<double>(d) - shift);
  for (long d = 1; d < n; ++d) prefix[d + 1] = prefix[d] + e[d];
  const double diag = std::exp(delta - shift);
  for (long i = 0; i < n; ++i) {
    const long k = mask.row_size(i);
    double* row = A.data() + i * n;
    if (k == 1) {
      row[i] += w;
      continue;
    }
    const double s = w / (prefix[k] + diag);
    for (long d = 1; d < k; ++d) row[i - d] += s * e[d];
    row[i] += s * diag;
  }
}
}  // namespace

RowMatrix alibi_head_kernel_dense(double slope, double delta, const Mask& mask, long n) {
  require(n >= 1, "kernel: n >= 1 required, got ", n);
  RowMatrix A = RowMatrix::Zero(n, n);
  add_head_dense(A, 1.0, slope, delta, mask);
  return A;
}

void alibi_kernel_dense_into(const AlibiModel& model, int l, long n, RowMatrix& A) {
  validate_model(model);
  require(n >= 1, "kernel: n >= 1 required, got ", n);
  const auto w = model_head_weights(model, l);
  const auto& slopes = model_slopes(model, l);
  const detail::FlushDenormals ftz;
  if (A.rows() != n || A.cols() != n) A.resize(n, n);
  A.setZero();
  for (std::size_t h = 0; h < slopes.size(); ++h)
    add_head_dense(A, w[h], slopes[h], model_delta(model, l, static_cast<int>(h)), model.mask);
}

RowMatrix alibi_kernel_dense(const AlibiModel& model, int l, long n) {
  RowMatrix A;
  alibi_kernel_dense_into(model, l, n, A);
  return A;
}

std::vector<RowMatrix> read_kernel_file(const std::string& path) {
  const std::vector<std::vector<double>> rows = read_number_rows(path, "kernel file");
  require(!rows.empty(), "kernel file '", path, "': no numbers found");
  const long n = static_cast<long>(rows[0].size());
  require(static_cast<long>(rows.size()) % n == 0, "kernel file '", path, "': ", rows.size(),
          " rows is not a multiple of the row length n = ", n);
  std::vector<RowMatrix> out;
  for (std::size_t r0 = 0; r0 < rows.size(); r0 += n) {
    RowMatrix A(n, n);
    for (long i = 0; i < n; ++i) {
      const auto& row = rows[r0 + i];
      require(static_cast<long>(row.size()) == n, "kernel file '", path, "': row ", r0 + i + 1, " has ", row.size(),
              " entries, expected n = ", n);
      double sum = 0;
      for (long j = 0; j < n; ++j) {
        require(row[j] >= 0, "kernel file '", path, "': negative entry ", row[j], " at row ", i, " col ", j);
        require(j <= i || row[j] <= 1e-12, "kernel file '", path, "': non-causal entry ", row[j], " at row ", i,
                " col ", j, " (j > i)");
        A(i, j) = j <= i ? row[j] : 0.0;
        sum += A(i, j);
      }
      require(std::abs(sum - 1) <= 1e-6, "kernel file '", path, "': row ", i, " sums to ", sum,
              " (rows must be stochastic within 1e-6)");
      A.row(i) /= sum;
    }
    out.push_back(std::move(A));
  }
  return out;
}

}  // namespace cf::rollout
