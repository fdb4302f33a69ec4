// Measured kernels from causalflow capture files (cf/rollout/kernel.hpp, docs/checkpoint_format.md):
// per layer, the uniform head mean of the stored attention probabilities averaged over sequences.
#include <cmath>
#include <nlohmann/json.hpp>

#include "cf/core/error.hpp"
#include "cf/core/json.hpp"
#include "cf/io/hdf5.hpp"
#include "cf/rollout/kernel.hpp"

namespace cf::rollout {

void require_capture_file(const std::string& path) {
  require(io::is_hdf5_file(path), "capture: '", path, "' is not an HDF5 file (or cannot be read)");
  const io::File f = io::File::open(path);
  const std::string format = f.has_attr("format") ? f.attr_string("format") : "";
  require(format != "causalflow-checkpoint", "'", path, "' is a checkpoint, not a capture: run `capture --checkpoint ",
          path, " --text FILE --out capture.h5` first, then `rollout --model capture.h5`");
  require(format == "causalflow-capture", "'", path, "' is not a causalflow capture (root attribute format = '", format,
          "', expected 'causalflow-capture'; see docs/checkpoint_format.md)");
}

bool capture_has_kernels(const std::string& path) { return io::File::open(path).has("layer_0/attn_probs"); }

std::vector<RowMatrix> read_capture_kernels(const std::string& path) {
  require_capture_file(path);
  const io::File f = io::File::open(path);
  require(f.has("layer_0/attn_probs"), "capture '", path,
          "' stores no attention probabilities (written with --no-probs): re-run capture without --no-probs, or give "
          "--kernel-file");
  // The number of layers comes from the capture's config (n_layer); every layer must be there:
  // a missing layer is refused, never filled with another layer's kernel.
  int L = -1;
  if (f.has_attr("config")) {
    try {
      const auto cfg = cf::parse_json(f.attr_string("config"), "config attribute");
      if (cfg.contains("n_layer")) L = cfg["n_layer"].get<int>();
    } catch (const nlohmann::json::exception&) {
      L = -1;
    }
  }
  if (L < 0) {  // no config: the layer groups present, which must be contiguous
    L = 0;
    while (f.has("layer_" + std::to_string(L))) ++L;
  }
  require(L >= 1, "capture '", path, "' declares no layers (config n_layer)");
  for (int l = 0; l < L; ++l)
    require(f.has("layer_" + std::to_string(l) + "/attn_probs"), "capture '", path, "' lacks /layer_", l,
            "/attn_probs (its config has n_layer = ", L, "): a missing capture layer is refused; re-run capture");
  std::vector<RowMatrix> ks;
  for (int l = 0; l < L; ++l) {
    const std::string ds = "layer_" + std::to_string(l) + "/attn_probs";
    const io::Shape sh = f.dataset_shape(ds);
    require(sh.size() == 4 && sh[2] == sh[3] && sh[0] >= 1 && sh[1] >= 1 && sh[2] >= 1, "capture '", path, "': ", ds,
            " must have shape [N, H, T, T], got ", io::shape_string(sh));
    const std::size_t N = sh[0], H = sh[1], T = sh[2];
    if (!ks.empty())
      require(static_cast<std::size_t>(ks[0].rows()) == T, "capture '", path, "': ", ds, " has T = ", T,
              " but layer_0 has T = ", ks[0].rows());
    RowMatrix A = RowMatrix::Zero(static_cast<long>(T), static_cast<long>(T));
    for (std::size_t n = 0; n < N; ++n) {
      const io::Tensor<float> p = f.read_rows<float>(ds, n, 1);  // one sequence: [1, H, T, T]
      for (std::size_t h = 0; h < H; ++h)
        for (std::size_t i = 0; i < T; ++i) {
          const float* row = p.data.data() + (h * T + i) * T;
          double mass = 0;
          for (std::size_t j = 0; j < T; ++j) {
            require(row[j] >= 0 && std::isfinite(row[j]), "capture '", path, "': ", ds, "[", n, ", ", h, ", ", i, ", ",
                    j, "] = ", row[j], " is not a finite non-negative weight");
            mass += row[j];
          }
          require(mass > 0, "capture '", path, "': ", ds, " row [", n, ", ", h, ", ", i, "] has no mass");
          for (std::size_t j = 0; j < T; ++j) A(static_cast<long>(i), static_cast<long>(j)) += row[j] / mass;
        }
    }
    A /= static_cast<double>(N * H);
    for (long i = 0; i < A.rows(); ++i) {
      const double above = A.row(i).tail(A.cols() - i - 1).sum();
      require(above <= 1e-6, "capture '", path, "': ", ds, " row ", i, " has mass ", above,
              " above the diagonal (not causal)");
      A.row(i).tail(A.cols() - i - 1).setZero();
      A.row(i) /= A.row(i).sum();  // exact row-stochasticity after float storage
    }
    ks.push_back(std::move(A));
  }
  require(!ks.empty(), "capture '", path, "' has no layer_0 group");
  return ks;
}

}  // namespace cf::rollout
