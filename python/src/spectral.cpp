// causalflow.spectral: the routing/filtering decomposition M = F + R of Routing/filtering (Jamil &
// Kapadia), its per-head metrics (rho, effective ranks, max Re lambda) for a matrix, a factor pair or
// every head of a checkpoint (weight or sequence level), and spectral surgery. Every function calls
// lib/spectral (cf/spectral/*.hpp).
#include "cf/core/error.hpp"
#include "cf/spectral/checkpoint.hpp"
#include "cf/spectral/decomposition.hpp"
#include "cf/spectral/model.hpp"
#include "cf/spectral/report.hpp"
#include "cf/spectral/sequence.hpp"
#include "cf/spectral/surgery.hpp"
#include "convert.hpp"

namespace cfpy {

using namespace cf::spectral;
using cf::require;

namespace {

Eigen::MatrixXd to_matrix(const py::handle& a, const std::string& what) {
  return Eigen::MatrixXd(to_row_matrix(a, what));
}

py::dict spectrum_dict(Spectrum&& s) {
  py::dict d;
  d["sigma"] = to_numpy_eigen(std::move(s.sigma));
  d["fro"] = s.fro;
  d["erank_entropy"] = s.erank_entropy;
  d["erank_participation"] = s.erank_participation;
  d["numerical_rank"] = s.numerical_rank;
  return d;
}

py::dict head_dict(HeadSpectrum&& h) {
  py::dict d;
  d["n"] = h.n;
  d["M"] = spectrum_dict(std::move(h.M));
  d["F"] = spectrum_dict(std::move(h.F));
  d["R"] = spectrum_dict(std::move(h.R));
  d["rho"] = h.rho;
  d["max_re_lambda"] = h.max_re_lambda;
  d["lambda_tol"] = h.lambda_tol;
  d["unstable"] = is_unstable(h);
  d["method"] = h.method;
  return d;
}

AnalysisOptions options(double rank_tol, bool eigenvalues) {
  AnalysisOptions o;
  o.rank_tol = rank_tol;
  o.eigenvalues = eigenvalues;
  return o;
}

// Per-head columns of a ModelSpectrum as arrays (one entry per analysed head, ordered by layer, head).
py::dict head_columns(const ModelSpectrum& m) {
  std::vector<int> layer, head;
  std::vector<double> rho, erank_R, erank_F, pr_R, pr_F, erank_M, max_re;
  for (const auto& h : m.heads) {
    layer.push_back(h.layer), head.push_back(h.head), rho.push_back(h.rho), erank_R.push_back(h.erank_R);
    erank_F.push_back(h.erank_F), pr_R.push_back(h.pr_R), pr_F.push_back(h.pr_F), erank_M.push_back(h.erank_M);
    max_re.push_back(h.max_re_lambda);
  }
  py::dict d;
  d["layer"] = to_numpy(std::move(layer));
  d["head"] = to_numpy(std::move(head));
  d["rho"] = to_numpy(std::move(rho));
  d["erank_R"] = to_numpy(std::move(erank_R));
  d["erank_F"] = to_numpy(std::move(erank_F));
  d["pr_R"] = to_numpy(std::move(pr_R));
  d["pr_F"] = to_numpy(std::move(pr_F));
  d["erank_M"] = to_numpy(std::move(erank_M));
  d["max_re_lambda"] = to_numpy(std::move(max_re));
  return d;
}

}  // namespace

void bind_spectral(py::module_& m) {
  m.doc() =
      "Routing/filtering decomposition of attention, Routing/filtering (Jamil & Kapadia): M = F + R with\n"
      "F = (M + M^T)/2 (filtering) and R = (M - M^T)/2 (routing), rho = ||R||_F / ||F||_F, entropy and\n"
      "participation effective ranks, max Re lambda(M); per head of a checkpoint at weight level (W_Q W_K^T)\n"
      "or sequence level (Q K^T / sqrt(d_k)), the layer profile (the spectral cascade), and surgery.";

  m.def(
      "split",
      [](const py::handle& M) {
        Parts p = split(to_matrix(M, "M"));
        return py::make_tuple(to_numpy_eigen(std::move(p.F)), to_numpy_eigen(std::move(p.R)));
      },
      py::arg("M"), "(F, R) = ((M + M^T)/2, (M - M^T)/2) of a square M (n, n) (Section 2).");
  m.def(
      "effective_rank",
      [](const py::handle& sigma, const std::string& form) {
        const Eigen::VectorXd s = to_vector(sigma, "sigma");
        require(form == "entropy" || form == "participation", "form must be 'entropy' or 'participation' (got '", form,
                "')");
        return form == "entropy" ? effective_rank_entropy(s) : effective_rank_participation(s);
      },
      py::arg("sigma"), py::arg("form") = "entropy",
      "Effective rank of singular values sigma (>= 0): 'entropy' exp(-sum p_i log p_i), p_i = sigma_i / sum sigma\n"
      "(Section 2), or 'participation' (sum sigma)^2 / sum sigma^2.");
  m.def("routing_filtering_ratio", &routing_filtering_ratio, py::arg("norm_R"), py::arg("norm_F"),
        "rho = ||R||_F / ||F||_F (rho > 1: a routing head).");

  m.def(
      "analyse",
      [](const py::handle& M, double rank_tol, bool eigenvalues) {
        const Eigen::MatrixXd mm = to_matrix(M, "M");
        HeadSpectrum h;
        {
          py::gil_scoped_release nogil;
          h = analyse_dense(mm, options(rank_tol, eigenvalues));
        }
        return head_dict(std::move(h));
      },
      py::arg("M"), py::arg("rank_tol") = 1e-10, py::arg("eigenvalues") = true,
      "All per-head metrics of one interaction matrix M (n, n), dense O(n^3): {'n', 'M', 'F', 'R' (each\n"
      "{'sigma' descending, 'fro', 'erank_entropy', 'erank_participation', 'numerical_rank'}), 'rho',\n"
      "'max_re_lambda', 'lambda_tol', 'unstable', 'method'} (Sections 2-3).");
  m.def(
      "analyse_factored",
      [](const py::handle& A, const py::handle& B, double scale, double rank_tol, bool eigenvalues) {
        const Eigen::MatrixXd a = to_matrix(A, "A"), b = to_matrix(B, "B");
        HeadSpectrum h;
        {
          py::gil_scoped_release nogil;
          h = analyse_factored(a, b, scale, options(rank_tol, eigenvalues));
        }
        return head_dict(std::move(h));
      },
      py::arg("A"), py::arg("B"), py::arg("scale") = 1.0, py::arg("rank_tol") = 1e-10, py::arg("eigenvalues") = true,
      "The metrics of M = scale A B^T without forming M (A, B: (m, r); weight level A = W_Q, B = W_K), in\n"
      "O(m r^2 + r^3); same dict as analyse().");

  m.def(
      "analyse_checkpoint",
      [](const std::string& checkpoint, const std::string& level, const std::string& layers, bool eigenvalues,
         const std::string& texts, const std::string& tokenizer, int max_tokens) {
        require(level == "weight" || level == "sequence" || level == "both",
                "level must be weight | sequence | both (got '", level, "')");
        py::dict out;
        nlohmann::json wj, sj;
        ModelSpectrum wm, sm;
        std::vector<int> counts;
        {
          py::gil_scoped_release nogil;
          const AttentionWeights w = read_attention_weights(checkpoint);
          const std::vector<int> ls = parse_layer_spec(layers, w.n_layer, "layers");
          AnalysisOptions aopt;
          aopt.eigenvalues = eigenvalues;
          if (level != "sequence") wm = analyse_weights(w, ls, aopt);
          if (level != "weight") {
            SequenceOptions so;
            so.texts_path = texts.empty() ? std::string(CF_DATA_DIR) + "/texts/routing_eval.txt" : texts;
            so.tokenizer = tokenizer;
            so.max_tokens = max_tokens;
            so.analysis = aopt;
            SequenceAnalysis sa = analyse_sequences(checkpoint, ls, so);
            sm = std::move(sa.spectrum);
            counts = sa.token_counts;
          }
        }
        if (level != "sequence") {
          py::dict d = from_json(to_json(wm));
          d["columns"] = head_columns(wm);
          out["weight"] = d;
        }
        if (level != "weight") {
          nlohmann::json j = to_json(sm);
          j["texts"] = counts;
          py::dict d = from_json(j);
          d["columns"] = head_columns(sm);
          out["sequence"] = d;
        }
        return out;
      },
      py::arg("checkpoint"), py::arg("level") = "weight", py::arg("layers") = "all", py::arg("eigenvalues") = true,
      py::arg("texts") = "", py::arg("tokenizer") = "auto", py::arg("max_tokens") = 1024,
      "Every head of a causalflow checkpoint (.h5) or Hugging Face folder at weight level (W_Q W_K^T, factorised)\n"
      "and/or sequence level (Q K^T / sqrt(d_k) on the texts, one per line; default the shipped evaluation\n"
      "texts): {'weight': {...}, 'sequence': {...}}, each the `spectral --format json` body section ('heads',\n"
      "'layers' = the spectral cascade, 'summary') plus 'columns': per-head arrays 'layer', 'head', 'rho',\n"
      "'erank_R', 'erank_F', 'pr_R', 'pr_F', 'erank_M', 'max_re_lambda'. Routing/filtering (Jamil & Kapadia),\n"
      "Sections 3 and 5.2.");

  m.def(
      "surgery",
      [](const py::handle& M, const std::string& component, long rank) {
        SurgerySpec spec;
        spec.component = parse_component(component);
        spec.rank = rank;
        const Eigen::MatrixXd mm = to_matrix(M, "M");
        Eigen::MatrixXd out;
        {
          py::gil_scoped_release nogil;
          out = apply_surgery(mm, spec);
        }
        return to_numpy_eigen(std::move(out));
      },
      py::arg("M"), py::arg("component"), py::arg("rank"),
      "M' = F' + R' with the 'routing', 'filtering' or 'both' parts truncated to `rank` by SVD (Eckart-Young);\n"
      "rank 0 removes the part, rank < 0 keeps M. Routing ranks must be even (rotation planes).\n"
      "Routing/filtering (Jamil & Kapadia), Section 5.1.");
  m.def(
      "linearize",
      [](const py::handle& M) {
        const Eigen::MatrixXd mm = to_matrix(M, "M");
        Eigen::MatrixXd out;
        {
          py::gil_scoped_release nogil;
          out = linearize_standard(mm);
        }
        return to_numpy_eigen(std::move(out));
      },
      py::arg("M"), "Linearised head (Section 6): R -> its top singular pair (rank 2), F -> (trace F / n) I.");
  m.def(
      "truncate_rank", [](const py::handle& X, long k) { return to_numpy_eigen(truncate_rank(to_matrix(X, "X"), k)); },
      py::arg("X"), py::arg("k"), "Best rank-k approximation of X (Eckart-Young).");
}

}  // namespace cfpy
