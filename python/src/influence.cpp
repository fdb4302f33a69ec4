// causalflow.influence: the measured influence profile of Position bias (Herasimchyk et al.), Eq. 6
// (gradient norms of the next-token target with respect to every input embedding, averaged over windows
// and normalised), the per-layer head-mean attention, and the Jacobian blocks d h_d(L+r) / d h_s(L) of
// Runway (Lee & Clark). Every function calls lib/influence.
#include "cf/influence/influence.hpp"

#include "cf/core/error.hpp"
#include "cf/influence/jacobian.hpp"
#include "model_handle.hpp"

namespace cfpy {

using namespace cf::influence;
using cf::require;

void bind_influence(py::module_& m) {
  m.doc() =
      "Measured influence (Position bias (Herasimchyk et al.), Eq. 6) and Jacobian blocks (Runway (Lee & Clark))\n"
      "of a trained model; compare with causalflow.rollout.";

  m.def(
      "profile",
      [](const py::object& model, const py::object& text, int n, int windows, const std::string& target, int batch) {
        const ModelHandle h = as_model(model);
        const auto& cfg = h.model->config;
        const int nn = n > 0 ? n : std::min(256, cfg.block_size);
        require(nn <= cfg.block_size, "n = ", nn, " exceeds the context of the model (block_size = ", cfg.block_size,
                ")");
        const auto tokens = as_tokens(h, text);
        const Target t = parse_target(target);
        Windows w;
        InfluenceResult r;
        {
          py::gil_scoped_release nogil;
          w = influence_windows(tokens, nn, windows);
          r = measure_influence(*h.model, w.tokens, t, batch);
        }
        py::dict d;
        d["profile"] = to_numpy_eigen(std::move(r.profile));
        d["mean_g"] = to_numpy_eigen(std::move(r.mean_g));
        d["per_window"] = to_numpy_eigen(std::move(r.per_window.g));
        d["window_starts"] = to_numpy(std::move(w.starts));
        d["backward_passes"] = r.backward_passes;
        return d;
      },
      py::arg("model"), py::arg("text"), py::arg("n") = 0, py::arg("windows") = 64, py::arg("target") = "probability",
      py::arg("batch") = 0,
      "Influence profile I_j of Position bias (Herasimchyk et al.), Eq. 6: for `windows` windows of n tokens\n"
      "(n = 0: min(256, block_size)) of the text (a file, a corpus name or an int token array), g(w, j) =\n"
      "|| d target / d e_j || with target 'probability' | 'log-probability' | 'logit' of the argmax next token,\n"
      "averaged over windows and normalised to sum 1. Returns {'profile' (n,), 'mean_g' (n,), 'per_window'\n"
      "(W, n), 'window_starts' (W,), 'backward_passes'}; 'profile' equals `influence --format json`.");

  m.def(
      "layer_attention",
      [](const py::object& model, const py::object& tokens) {
        const ModelHandle h = as_model(model);
        const auto t = as_tokens(h, tokens);
        LayerAttention la;
        {
          py::gil_scoped_release nogil;
          la = layer_attention(*h.model, t);
        }
        py::list out;
        for (auto& A : la.A) out.append(to_numpy_eigen(std::move(A)));
        return out;
      },
      py::arg("model"), py::arg("tokens"),
      "Head-mean attention A(l) of every layer on the tokens, one (n, n) lower-triangular row-stochastic\n"
      "float64 array per layer (the A of Runway (Lee & Clark); input of causalflow.rollout.jacobian_bound).");

  m.def(
      "jacobian_blocks",
      [](const py::object& model, const py::object& tokens, int L, int r) {
        const ModelHandle h = as_model(model);
        const auto t = as_tokens(h, tokens);
        JacobianBlocks jb;
        {
          py::gil_scoped_release nogil;
          jb = jacobian_blocks(*h.model, t, L, r);
        }
        py::dict d;
        d["frobenius"] = to_numpy_eigen(std::move(jb.frobenius));
        d["spectral"] = to_numpy_eigen(std::move(jb.spectral));
        d["vjps"] = jb.vjps;
        d["backward_calls"] = jb.backward_calls;
        return d;
      },
      py::arg("model"), py::arg("tokens"), py::arg("L") = 0, py::arg("r") = 1,
      "Jacobian blocks J_ds = d h_d(L+r) / d h_s(L) between layers L and L + r on one window (Runway (Lee &\n"
      "Clark), Theorem 3.3): {'frobenius' (n, n) ||J_ds||_F, 'spectral' (n, n) largest singular value, zero\n"
      "for s > d; 'vjps', 'backward_calls'}.");
}

}  // namespace cfpy
