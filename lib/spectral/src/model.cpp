#include "cf/spectral/model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "cf/core/error.hpp"
#include "cf/core/omp_exception.hpp"
#include "cf/spectral/decomposition.hpp"

namespace cf::spectral {

namespace {
// the median of the defined values; NaN when there are none (every head's rho 0/0)
double median(std::vector<double> v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
}  // namespace

HeadResult head_result(int layer, int head, const std::string& attn, const HeadSpectrum& s, Index keep_sigma) {
  HeadResult r;
  r.layer = layer;
  r.head = head;
  r.attn = attn;
  r.rho = s.rho;
  r.erank_R = s.R.erank_entropy;
  r.erank_F = s.F.erank_entropy;
  r.pr_R = s.R.erank_participation;
  r.pr_F = s.F.erank_participation;
  r.erank_M = s.M.erank_entropy;
  r.norm_M = s.M.fro;
  r.norm_F = s.F.fro;
  r.norm_R = s.R.fro;
  r.max_re_lambda = s.max_re_lambda;
  r.lambda_tol = s.lambda_tol;
  r.rank_R = s.R.numerical_rank;
  r.rank_F = s.F.numerical_rank;
  r.sigma_R = s.R.sigma.head(std::min(keep_sigma, s.R.sigma.size()));
  r.sigma_F = s.F.sigma.head(std::min(keep_sigma, s.F.sigma.size()));
  return r;
}

namespace {

std::vector<int> checked_layers(const AttentionWeights& w, const std::vector<int>& layers) {
  std::vector<int> ls = layers;
  if (ls.empty())
    for (int l = 0; l < int(w.layers.size()); ++l) ls.push_back(l);
  for (int l : ls)
    require(l >= 0 && l < int(w.layers.size()), "layer ", l,
            " is out of range (0 <= layer < n_layer = ", w.layers.size(), ")");
  return ls;
}

// Run `head(j, l, h, U)` for every (layer, head) job in parallel, U = [W_Q, W_K] of the head in
// double, with each error naming the checkpoint, layer and head.
template <class Head>
void for_each_head(const AttentionWeights& w, const std::vector<std::pair<int, int>>& jobs, Head&& head) {
  // exceptions never leave the region (cf/core/omp_exception.hpp): the declaration of U cannot
  // throw and every iteration of the worksharing loop runs through omp_errors
  cf::OmpExceptions omp_errors;
#pragma omp parallel
  {
    // One stacked-factor buffer per thread, reused across heads: a fresh d_model x 2 d_head
    // double matrix per head (786 KB at GPT-2 size) is returned to the OS and page-faulted back
    // in every time, which cost about a quarter of the analysis time.
    Eigen::MatrixXd U;
#pragma omp for schedule(dynamic)
    for (long j = 0; j < long(jobs.size()); ++j)
      omp_errors.run([&] {
        const int l = jobs[j].first, h = jobs[j].second;
        try {
          const LayerWeights& lw = w.layers[l];
          // The stacked factor U = [W_Q, W_K] in double, built straight from the float32 weights.
          U.resize(lw.d_model, 2 * lw.d_head);
          U.leftCols(lw.d_head) = lw.W_Q(h).cast<double>();
          U.rightCols(lw.d_head) = lw.W_K(h).cast<double>();
          require(U.allFinite(), "the attention weights W_Q, W_K of this head hold inf or NaN");
          head(j, U);
        } catch (const std::exception& e) {
          throw InvalidArgument(str(w.path.empty() ? std::string() : "checkpoint '" + w.path + "': ", "layer ", l,
                                    " head ", h, ": ", e.what()));
        }
      });
  }
  omp_errors.rethrow();
}

std::vector<std::pair<int, int>> head_jobs(const AttentionWeights& w, const std::vector<int>& layers) {
  std::vector<std::pair<int, int>> jobs;
  for (int l : layers)
    for (int h = 0; h < w.layers[l].n_head; ++h) jobs.emplace_back(l, h);
  return jobs;
}

// [[0, X], [X^T, 0]]: symmetric, eigenvalues +-sigma_i(X) and |rows - cols| zeros.
Eigen::MatrixXd symmetric_embedding(const Eigen::MatrixXd& X) {
  const Index a = X.rows(), b = X.cols();
  Eigen::MatrixXd E = Eigen::MatrixXd::Zero(a + b, a + b);
  E.topRightCorner(a, b) = X;
  E.bottomLeftCorner(b, a) = X.transpose();
  return E;
}

// The k largest entries of ev (the sigma of an embedding's eigenvalues), descending.
Eigen::VectorXd largest(Eigen::VectorXd ev, Index k) {
  std::sort(ev.data(), ev.data() + ev.size(), [](double a, double b) { return a > b; });
  return ev.head(k);
}

// The eigenvalues of every matrix of `ms` by `eig`, one batch per matrix size.
std::vector<Eigen::VectorXd> eigenvalues(const std::vector<Eigen::MatrixXd>& ms, const SymEigenSolver& eig) {
  std::map<Index, std::vector<std::size_t>> by_size;
  for (std::size_t i = 0; i < ms.size(); ++i) by_size[ms[i].rows()].push_back(i);
  std::vector<Eigen::VectorXd> out(ms.size());
  for (const auto& [n, idx] : by_size) {
    std::vector<Eigen::MatrixXd> batch;
    for (std::size_t i : idx) batch.push_back(ms[i]);
    const std::vector<Eigen::VectorXd> ev = eig.solve(batch);
    require(ev.size() == batch.size(), "batched eigensolver: ", ev.size(), " results for ", batch.size(), " matrices");
    for (std::size_t k = 0; k < idx.size(); ++k) {
      require(ev[k].size() == n, "batched eigensolver: ", ev[k].size(), " eigenvalues of a ", n, " x ", n, " matrix");
      out[idx[k]] = ev[k];
    }
  }
  return out;
}

}  // namespace

ModelSpectrum analyse_weights(const AttentionWeights& w, const std::vector<int>& layers, const AnalysisOptions& opt) {
  const std::vector<std::pair<int, int>> jobs = head_jobs(w, checked_layers(w, layers));
  ModelSpectrum m;
  m.level = "weight";
  m.heads.resize(jobs.size());
  for_each_head(w, jobs, [&](long j, const Eigen::MatrixXd& U) {
    const LayerWeights& lw = w.layers[jobs[j].first];
    m.heads[j] = head_result(jobs[j].first, jobs[j].second, lw.attn, analyse_factored_stacked(U, 1.0, opt));
  });
  aggregate(m);
  return m;
}

ModelSpectrum analyse_weights(const AttentionWeights& w, const std::vector<int>& layers, const AnalysisOptions& opt,
                              const SymEigenSolver& eig) {
  const std::vector<std::pair<int, int>> jobs = head_jobs(w, checked_layers(w, layers));
  std::vector<FactoredCores> cores(jobs.size());
  for_each_head(w, jobs, [&](long j, const Eigen::MatrixXd& U) { cores[j] = factored_cores(U, 1.0); });
  // the symmetric problems of every head, batched: CF, and the embeddings of CR and of C's rows
  std::vector<Eigen::MatrixXd> F(jobs.size()), R(jobs.size()), M(opt.spectrum_M ? jobs.size() : 0);
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    F[j] = cores[j].CF;
    R[j] = symmetric_embedding(cores[j].CR);
    if (opt.spectrum_M) M[j] = symmetric_embedding(cores[j].C.topRows(cores[j].rr));
  }
  const std::vector<Eigen::VectorXd> eF = eigenvalues(F, eig), eR = eigenvalues(R, eig), eM = eigenvalues(M, eig);
  ModelSpectrum m;
  m.level = "weight";
  m.heads.resize(jobs.size());
  cf::OmpExceptions omp_errors;  // max Re lambda: a general eigensolver per head, on the CPU
#pragma omp parallel for schedule(dynamic)
  for (long j = 0; j < long(jobs.size()); ++j)
    omp_errors.run([&] {
      const FactoredCores& c = cores[j];
      const Index p = c.CF.rows();
      const double tol = std::max(rank_tolerance(c.m, opt), double(p) * eig.rounding_unit);
      const Eigen::VectorXd sM = opt.spectrum_M ? largest(eM[j], c.rr) : Eigen::VectorXd();
      const HeadSpectrum s = factored_spectrum(c, eF[j].cwiseAbs(), largest(eR[j], p), sM, tol, opt);
      m.heads[j] = head_result(jobs[j].first, jobs[j].second, w.layers[jobs[j].first].attn, s);
    });
  omp_errors.rethrow();
  aggregate(m);
  return m;
}

HeadResult average_heads(const std::vector<HeadResult>& v) {
  require(!v.empty(), "average_heads needs at least one result");
  HeadResult r = v.back();
  const double k = double(v.size());
  auto mean = [&](double HeadResult::*f) {
    double s = 0;
    for (const auto& x : v) s += x.*f;
    r.*f = s / k;
  };
  for (auto f : {&HeadResult::rho, &HeadResult::erank_R, &HeadResult::erank_F, &HeadResult::pr_R, &HeadResult::pr_F,
                 &HeadResult::erank_M, &HeadResult::norm_M, &HeadResult::norm_F, &HeadResult::norm_R,
                 &HeadResult::max_re_lambda, &HeadResult::lambda_tol})
    mean(f);
  return r;
}

void aggregate(ModelSpectrum& m) {
  std::map<int, std::vector<const HeadResult*>> by_layer;
  for (const auto& h : m.heads) by_layer[h.layer].push_back(&h);
  m.layers.clear();
  std::vector<double> all_rho;
  ModelSummary s;
  for (const auto& [l, hs] : by_layer) {
    LayerProfile p;
    p.layer = l;
    p.attn = hs.front()->attn;
    std::vector<double> rhos;
    p.max_re_lambda_max = -1e300;
    for (const HeadResult* h : hs) {
      p.erank_R += h->erank_R;
      p.erank_F += h->erank_F;
      p.pr_R += h->pr_R;
      // rho = 0/0 (M = 0) is undefined: counted, not averaged (a NaN would poison the layer's mean
      // and make the median's sort order meaningless)
      if (std::isnan(h->rho)) {
        ++p.undefined_rho_heads;
      } else {
        p.rho += h->rho;
        rhos.push_back(h->rho);
        all_rho.push_back(h->rho);
      }
      p.max_re_lambda += h->max_re_lambda;
      p.max_re_lambda_max = std::max(p.max_re_lambda_max, h->max_re_lambda);
      p.routing_heads += h->rho > 1;
      p.unstable_heads += h->max_re_lambda > h->lambda_tol;  // above rounding (decomposition.hpp)
      s.erank_R_mean += h->erank_R;
      s.erank_F_mean += h->erank_F;
      s.max_re_lambda_mean += h->max_re_lambda;
    }
    const double k = double(hs.size());
    p.erank_R /= k;
    p.erank_F /= k;
    p.pr_R /= k;
    p.rho = rhos.empty() ? std::numeric_limits<double>::quiet_NaN() : p.rho / double(rhos.size());
    p.max_re_lambda /= k;
    p.rho_median = median(rhos);
    s.heads += int(hs.size());
    s.routing_heads += p.routing_heads;
    s.unstable_heads += p.unstable_heads;
    s.undefined_rho_heads += p.undefined_rho_heads;
    m.layers.push_back(p);
  }
  if (s.heads > 0) {
    s.erank_R_mean /= s.heads;
    s.erank_F_mean /= s.heads;
    s.max_re_lambda_mean /= s.heads;
    s.rho_median = median(all_rho);
  }
  m.summary = s;
}

}  // namespace cf::spectral
