// causalflow.model: load a causalflow checkpoint (.h5) or a Hugging Face folder, tokenise text,
// forward to next-token logits, capture every layer's attention and residual stream into numpy
// arrays, or write a capture file for `rollout` / `influence`. Every function calls lib/nn and lib/hf.
#include <algorithm>

#include "cf/core/error.hpp"
#include "cf/core/file_identity.hpp"
#include "cf/hf/tokenizer.hpp"
#include "cf/model/load.hpp"
#include "cf/nn/capture.hpp"
#include "cf/nn/config.hpp"
#include "model_handle.hpp"

namespace cfpy {

using namespace cf::nn;
using cf::require;

ModelHandle as_model(const py::object& m) {
  if (py::isinstance<ModelHandle>(m)) return m.cast<ModelHandle>();
  require(py::isinstance<py::str>(m) || py::hasattr(m, "__fspath__"),
          "model must be a causalflow.model.Model or the path of a checkpoint / Hugging Face folder");
  ModelHandle h;
  h.path = py::isinstance<py::str>(m) ? m.cast<std::string>() : m.attr("__fspath__")().cast<std::string>();
  py::gil_scoped_release nogil;
  h.model = std::make_shared<const Model<float>>(cf::model::load_model(h.path));
  return h;
}

std::vector<std::int32_t> as_tokens(const ModelHandle& m, const py::object& tokens) {
  const int V = m.model->config.vocab_size;
  if (py::isinstance<py::str>(tokens)) {
    const std::string text = tokens.cast<std::string>();
    py::gil_scoped_release nogil;
    return cf::hf::tokenize_text_for_checkpoint(m.path, V, text, "", nullptr);
  }
  auto arr = py::array_t<std::int64_t, py::array::forcecast>::ensure(tokens);
  require(bool(arr) && arr.ndim() == 1, "tokens must be a 1-D array of token ids or a text file / corpus name");
  std::vector<std::int32_t> out(arr.shape(0));
  auto u = arr.unchecked<1>();
  for (py::ssize_t i = 0; i < u.shape(0); ++i) {
    require(u(i) >= 0 && u(i) < V, "tokens[", i, "] = ", u(i), " is outside the vocabulary [0, ", V, ")");
    out[i] = static_cast<std::int32_t>(u(i));
  }
  require(!out.empty(), "tokens must not be empty");
  return out;
}

namespace {

// One captured quantity of every layer: float32 arrays moved behind capsules.
py::array_t<float> take(std::vector<float>&& v, std::vector<py::ssize_t> shape) {
  auto* owner = new std::vector<float>(std::move(v));
  py::capsule base(owner, [](void* p) { delete static_cast<std::vector<float>*>(p); });
  std::vector<py::ssize_t> strides(shape.size());
  py::ssize_t s = sizeof(float);
  for (std::size_t i = shape.size(); i-- > 0;) strides[i] = s, s *= shape[i];
  return py::array_t<float>(shape, strides, owner->data(), base);
}

struct LayerStore {
  int H = 0, T = 0, dh = 0, C = 0;
  std::vector<float> probs, q, k, resid_in, attn_out, resid_out;
};

}  // namespace

void bind_model(py::module_& m) {
  m.doc() =
      "Load a causalflow checkpoint (.h5, docs/checkpoint_format.md) or a Hugging Face folder (config.json +\n"
      "*.safetensors, docs/hf.md), tokenise, forward to logits, capture activations as numpy arrays.";

  py::class_<ModelHandle>(m, "Model", "A loaded model (causalflow.model.load).")
      .def_readonly("path", &ModelHandle::path)
      .def_property_readonly(
          "config", [](const ModelHandle& h) { return from_json(to_json(h.model->config)); },
          "The model config as a dict (the checkpoint's config JSON).")
      .def_property_readonly("n_layer", [](const ModelHandle& h) { return h.model->config.n_layer; })
      .def_property_readonly("n_head", [](const ModelHandle& h) { return h.model->config.n_head; })
      .def_property_readonly("d_model", [](const ModelHandle& h) { return h.model->config.d_model; })
      .def_property_readonly("vocab_size", [](const ModelHandle& h) { return h.model->config.vocab_size; })
      .def_property_readonly("block_size", [](const ModelHandle& h) { return h.model->config.block_size; })
      .def_property_readonly("parameters", [](const ModelHandle& h) { return param_count(h.model->config); })
      .def("__repr__", [](const ModelHandle& h) {
        const auto& c = h.model->config;
        return cf::str("Model('", h.path, "', n_layer=", c.n_layer, ", n_head=", c.n_head, ", d_model=", c.d_model,
                       ", vocab_size=", c.vocab_size, ", block_size=", c.block_size, ")");
      });

  m.def(
      "load", [](const py::object& path) { return as_model(path); }, py::arg("path"),
      "Load a causalflow checkpoint (.h5) or a Hugging Face folder; ValueError for a missing, truncated or\n"
      "foreign file (the tools' exit 2).");

  m.def(
      "tokenize",
      [](const py::object& model, const std::string& text) {
        const ModelHandle h = as_model(model);
        return to_numpy(as_tokens(h, py::str(text)));
      },
      py::arg("model"), py::arg("text"),
      "Token ids (int32, shape (N,)) of a text file or packaged corpus name ('kjv', 'brown') in the model's\n"
      "tokenizer: a Hugging Face folder's tokenizer.json, else bytes (vocab 256) or GPT-2 BPE (50257).");

  m.def(
      "forward",
      [](const py::object& model, const py::object& tokens) {
        const ModelHandle h = as_model(model);
        const auto t = as_tokens(h, tokens);
        require(static_cast<int>(t.size()) <= h.model->config.block_size, "tokens has ", t.size(),
                " entries but the model's block_size is ", h.model->config.block_size);
        Eigen::MatrixXf logits;
        {
          py::gil_scoped_release nogil;
          logits = forward_logits(*h.model, t);
        }
        return to_numpy_eigen(std::move(logits));
      },
      py::arg("model"), py::arg("tokens"),
      "Next-token logits of one sequence: float32 array (T, vocab_size), row t predicts token t+1 (T <=\n"
      "block_size). tokens: int array or a text file / corpus name. A view of the C++ matrix (no copy).");

  m.def(
      "capture",
      [](const py::object& model, const py::object& tokens, const std::vector<std::string>& what,
         std::optional<std::vector<int>> heads) {
        const ModelHandle h = as_model(model);
        const auto t = as_tokens(h, tokens);
        const auto& c = h.model->config;
        require(static_cast<int>(t.size()) <= c.block_size, "tokens has ", t.size(), " entries but block_size is ",
                c.block_size);
        static const std::vector<std::string> known = {"attn_probs", "q", "k", "resid_in", "attn_out", "resid_out"};
        for (const auto& w : what)
          require(std::find(known.begin(), known.end(), w) != known.end(), "what: unknown quantity '", w,
                  "' (attn_probs, q, k, resid_in, attn_out, resid_out)");
        auto want = [&](const char* k) { return std::find(what.begin(), what.end(), k) != what.end(); };
        std::vector<LayerStore> layers(c.n_layer);
        ForwardHooks hooks;
        if (heads) {
          for (int hh : *heads) require(hh >= 0 && hh < c.n_head, "heads: ", hh, " is outside [0, ", c.n_head, ")");
          hooks.capture_heads = *heads;
        }
        hooks.on_layer = [&](const LayerActivations& a) {
          LayerStore& s = layers[a.layer];
          s.H = a.n_head, s.T = a.seq_len, s.dh = a.d_head, s.C = a.d_model;
          const std::size_t HT = std::size_t(a.n_head) * a.seq_len;
          auto copy = [](std::vector<float>& dst, const float* src, std::size_t n) {
            if (src) dst.assign(src, src + n);
          };
          if (want("attn_probs")) copy(s.probs, a.attn_probs, HT * a.seq_len);
          if (want("q")) copy(s.q, a.q, HT * a.d_head);
          if (want("k")) copy(s.k, a.k, HT * a.d_head);
          if (want("resid_in")) copy(s.resid_in, a.resid_in, std::size_t(a.seq_len) * a.d_model);
          if (want("attn_out")) copy(s.attn_out, a.attn_out, std::size_t(a.seq_len) * a.d_model);
          if (want("resid_out")) copy(s.resid_out, a.resid_out, std::size_t(a.seq_len) * a.d_model);
        };
        Eigen::MatrixXf logits;
        {
          py::gil_scoped_release nogil;
          logits = forward_logits(*h.model, t, &hooks);
        }
        py::dict out;
        out["tokens"] = to_numpy(std::vector<std::int32_t>(t));
        out["logits"] = to_numpy_eigen(std::move(logits));
        for (int l = 0; l < c.n_layer; ++l) {
          LayerStore& s = layers[l];
          py::dict d;
          const py::ssize_t H = s.H, T = s.T, dh = s.dh, C = s.C;
          if (!s.probs.empty()) d["attn_probs"] = take(std::move(s.probs), {H, T, T});
          if (!s.q.empty()) d["q"] = take(std::move(s.q), {H, T, dh});
          if (!s.k.empty()) d["k"] = take(std::move(s.k), {H, T, dh});
          if (!s.resid_in.empty()) d["resid_in"] = take(std::move(s.resid_in), {T, C});
          if (!s.attn_out.empty()) d["attn_out"] = take(std::move(s.attn_out), {T, C});
          if (!s.resid_out.empty()) d["resid_out"] = take(std::move(s.resid_out), {T, C});
          out[py::str(cf::str("layer_", l))] = d;
        }
        return out;
      },
      py::arg("model"), py::arg("tokens"),
      py::arg("what") = std::vector<std::string>{"attn_probs", "q", "k", "resid_in", "attn_out", "resid_out"},
      py::arg("heads") = py::none(),
      "One forward pass with every layer captured: {'tokens' (T,), 'logits' (T, V), 'layer_0': {...}, ...}\n"
      "with, per layer, float32 'attn_probs' (H, T, T) (row = query; branch-fused bridge rows sum to 1 + the\n"
      "bridges admitting them), 'q', 'k' (H, T, d_head), 'resid_in', 'attn_out', 'resid_out' (T, d_model):\n"
      "the layout of a capture file's /layer_{l} groups (docs/checkpoint_format.md). `what` limits the\n"
      "quantities, `heads` the heads whose probabilities are materialised.");

  m.def(
      "capture_file",
      [](const py::object& model, const std::string& text, const std::string& out, int seq_len, int sequences,
         bool store_qk) {
        const ModelHandle h = as_model(model);
        const auto t = as_tokens(h, py::str(text));
        check_output_path(out, "out");  // a missing folder or a read-only file: ValueError before the work
        // an output never replaces an input (docs/conventions.md "Output files"): the checkpoint, the model
        // files of a Hugging Face folder, or the text
        std::vector<std::string> inputs = {h.path, text};
        for (const char* f : {"config.json", "model.safetensors", "tokenizer.json"}) inputs.push_back(h.path + "/" + f);
        for (const auto& in : inputs)
          require(!cf::same_file(cf::file_identity(out), cf::file_identity(in)), "out '", out,
                  "' is the same file as the input '", in, "': choose another path");
        CaptureSummary s;
        {
          py::gil_scoped_release nogil;
          const int T = seq_len > 0 ? seq_len : std::min(256, h.model->config.block_size);
          const auto windows = capture_windows(t, T, sequences);
          CaptureOptions co;
          co.store_qk = store_qk;
          co.source = text;
          s = capture_model(*h.model, windows, out, co);
        }
        py::dict d;
        d["path"] = out;
        d["nll"] = s.nll;
        d["sequences"] = s.n_seq;
        d["seq_len"] = s.seq_len;
        return d;
      },
      py::arg("model"), py::arg("text"), py::arg("out"), py::arg("seq_len") = 0, py::arg("sequences") = 4,
      py::arg("store_qk") = false,
      "Write a capture file (HDF5, docs/checkpoint_format.md) of `sequences` windows of seq_len tokens (0 =\n"
      "min(256, block_size)) of the text: what causalflow.rollout.rollout(model=out) reads as measured alpha\n"
      "and kernels (Position bias (Herasimchyk et al.), Eq. 1). Returns {'path', 'nll', 'sequences', 'seq_len'}.");
}

}  // namespace cfpy
