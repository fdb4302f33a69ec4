#include "cf/io/capture.hpp"

#include <cmath>

#include "cf/core/error.hpp"

namespace cf::io {

ResidualAlpha residual_alpha(const Eigen::Ref<const Eigen::MatrixXd>& resid_norm,
                             const Eigen::Ref<const Eigen::MatrixXd>& attn_norm) {
  require(resid_norm.rows() >= 1 && resid_norm.cols() >= 1, "residual_alpha needs N >= 1 and T >= 1 (got ",
          resid_norm.rows(), " x ", resid_norm.cols(), ")");
  require(resid_norm.rows() == attn_norm.rows() && resid_norm.cols() == attn_norm.cols(),
          "residual_alpha: norms must have equal shapes (resid ", resid_norm.rows(), " x ", resid_norm.cols(),
          ", attn ", attn_norm.rows(), " x ", attn_norm.cols(), ")");
  // NaN fails every comparison: an overflowing forward pass (finite weights, inf/NaN norms) is named as such
  require(resid_norm.allFinite() && attn_norm.allFinite(),
          "residual_alpha: the residual / attention norms are not finite (the forward pass overflowed float32; check "
          "the checkpoint's weights)");
  require(resid_norm.minCoeff() >= 0 && attn_norm.minCoeff() >= 0, "residual_alpha: norms must be >= 0");
  const Eigen::Index N = resid_norm.rows(), T = resid_norm.cols();
  auto ratio = [](double a, double x) { return a + x > 0 ? a / (a + x) : 0.0; };
  ResidualAlpha r;
  for (Eigen::Index n = 0; n < N; ++n) {
    double tm = 0;
    for (Eigen::Index t = 0; t < T; ++t) tm += ratio(attn_norm(n, t), resid_norm(n, t));
    r.token_mean += tm / static_cast<double>(T);
    r.frobenius += ratio(attn_norm.row(n).norm(), resid_norm.row(n).norm());
  }
  r.token_mean /= static_cast<double>(N);
  r.frobenius /= static_cast<double>(N);
  return r;
}

namespace {
std::string layer_name(int l) { return "layer_" + std::to_string(l); }
std::size_t sz(int v) { return static_cast<std::size_t>(v); }
}  // namespace

CaptureWriter::CaptureWriter(File& f, const CaptureHeader& h) : file_(f), header_(h) {
  const std::size_t L = h.n_head.size();
  resid_.assign(L, Eigen::MatrixXd::Zero(h.n_seq, h.seq_len));
  attn_.assign(L, Eigen::MatrixXd::Zero(h.n_seq, h.seq_len));
  done_.assign(L, std::vector<bool>(sz(h.n_seq), false));
}

void CaptureWriter::write(int layer, int seq, const LayerCapture& c) {
  const int L = static_cast<int>(header_.n_head.size());
  require(layer >= 0 && layer < L, "capture layer must satisfy 0 <= layer < ", L, " (got ", layer, ")");
  require(seq >= 0 && seq < header_.n_seq, "capture sequence must satisfy 0 <= seq < ", header_.n_seq, " (got ", seq,
          ")");
  require(!done_[sz(layer)][sz(seq)], "capture layer ", layer, " sequence ", seq, " written twice");
  require(c.resid_in_norm && c.attn_out_norm, "capture layer ", layer,
          ": resid_in_norm and attn_out_norm are required");
  if (!started_) {
    started_ = true;
    probs_ = c.attn_probs != nullptr;
    qk_ = c.q != nullptr && c.k != nullptr;
    out_norm_ = c.resid_out_norm != nullptr;
    for (int l = 0; l < L; ++l) {
      Group g = file_.create_group(layer_name(l));
      const std::size_t N = sz(header_.n_seq), T = sz(header_.seq_len), H = sz(header_.n_head[sz(l)]),
                        D = sz(header_.d_head[sz(l)]);
      if (probs_) g.create_dataset<float>("attn_probs", Shape{N, H, T, T});
      if (qk_) {
        g.create_dataset<float>("q", Shape{N, H, T, D});
        g.create_dataset<float>("k", Shape{N, H, T, D});
      }
      g.create_dataset<float>("resid_in_norm", Shape{N, T});
      g.create_dataset<float>("attn_out_norm", Shape{N, T});
      if (out_norm_) g.create_dataset<float>("resid_out_norm", Shape{N, T});
    }
  } else {
    require(probs_ == (c.attn_probs != nullptr) && qk_ == (c.q != nullptr && c.k != nullptr) &&
                out_norm_ == (c.resid_out_norm != nullptr),
            "capture layer ", layer, " sequence ", seq,
            ": the same datasets must be given for every layer and sequence");
  }
  Group g = file_.open_group(layer_name(layer));
  const auto s = sz(seq);
  if (probs_) g.write_rows("attn_probs", s, 1, c.attn_probs);
  if (qk_) {
    g.write_rows("q", s, 1, c.q);
    g.write_rows("k", s, 1, c.k);
  }
  g.write_rows("resid_in_norm", s, 1, c.resid_in_norm);
  g.write_rows("attn_out_norm", s, 1, c.attn_out_norm);
  if (out_norm_) g.write_rows("resid_out_norm", s, 1, c.resid_out_norm);
  for (int t = 0; t < header_.seq_len; ++t) {
    resid_[sz(layer)](seq, t) = c.resid_in_norm[t];
    attn_[sz(layer)](seq, t) = c.attn_out_norm[t];
  }
  done_[sz(layer)][s] = true;
}

void CaptureWriter::write_tokens(int seq, const std::vector<std::int32_t>& tokens) {
  require(seq >= 0 && seq < header_.n_seq, "capture sequence must satisfy 0 <= seq < ", header_.n_seq, " (got ", seq,
          ")");
  require(static_cast<int>(tokens.size()) == header_.seq_len, "capture tokens of sequence ", seq, ": got ",
          tokens.size(), ", expected T = ", header_.seq_len);
  if (!tokens_) {
    file_.create_dataset<std::int64_t>("tokens", Shape{sz(header_.n_seq), sz(header_.seq_len)});
    tokens_ = true;
  }
  std::vector<std::int64_t> row(tokens.begin(), tokens.end());
  file_.write_rows("tokens", sz(seq), 1, row.data());
}

void CaptureWriter::finish() {
  const std::size_t L = header_.n_head.size();
  std::vector<double> tm(L), fr(L);
  for (std::size_t l = 0; l < L; ++l) {
    for (std::size_t n = 0; n < done_[l].size(); ++n)
      if (!done_[l][n]) throw Error(str("capture incomplete: layer ", l, " sequence ", n, " was never written"));
    const ResidualAlpha a = residual_alpha(resid_[l], attn_[l]);
    tm[l] = a.token_mean;
    fr[l] = a.frobenius;
    Group g = file_.open_group(layer_name(static_cast<int>(l)));
    g.set_attr("alpha_token_mean", a.token_mean);
    g.set_attr("alpha_frobenius", a.frobenius);
  }
  file_.write("alpha_token_mean", tm, Shape{L});
  file_.write("alpha_frobenius", fr, Shape{L});
}

void write_capture_atomic(const std::string& path, const CaptureHeader& h,
                          const std::function<void(CaptureWriter&)>& fill) {
  require(h.n_seq >= 1 && h.seq_len >= 1, "capture needs N >= 1 sequences of T >= 1 tokens (got N = ", h.n_seq,
          ", T = ", h.seq_len, ")");
  require(!h.n_head.empty() && h.n_head.size() == h.d_head.size(),
          "capture needs L >= 1 layers with one head count "
          "and one head dimension each (got ",
          h.n_head.size(), " and ", h.d_head.size(), ")");
  for (std::size_t l = 0; l < h.n_head.size(); ++l)
    require(h.n_head[l] >= 1 && h.d_head[l] >= 1, "capture layer ", l, ": n_head and d_head must be >= 1 (got ",
            h.n_head[l], ", ", h.d_head[l], ")");
  for (std::size_t l = 0; l < h.n_head.size() && !h.heads.empty(); ++l)
    require(static_cast<int>(h.heads.size()) == h.n_head[l], "capture layer ", l, ": ", h.heads.size(),
            " head indices given but n_head = ", h.n_head[l]);
  write_hdf5_atomic(path, [&](File& f) {
    f.set_attr("format", "causalflow-capture");
    f.set_attr("format_version", 1);
    f.set_attr("config", h.config_json);
    f.set_attr("source", h.source);
    if (!h.heads.empty()) {
      const std::vector<std::int64_t> heads(h.heads.begin(), h.heads.end());
      f.write("heads", heads, Shape{heads.size()});
    }
    CaptureWriter w(f, h);
    fill(w);
    w.finish();
  });
}

}  // namespace cf::io
