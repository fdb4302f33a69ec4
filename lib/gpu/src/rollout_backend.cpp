// cf::gpu::make_rollout_backend: lib/rollout's models flattened to the arrays of the device loops
// (cf/gpu/analysis_ops.hpp), with the checks of the CPU paths first, so that both refuse the same
// input with the same message.
#include "cf/gpu/rollout_backend.hpp"

#include "cf/core/error.hpp"
#include "cf/gpu/analysis_ops.hpp"
#include "cf/rollout/preset.hpp"

namespace cf::gpu {

namespace {

std::vector<double> to_std(const Eigen::VectorXd& x) { return std::vector<double>(x.data(), x.data() + x.size()); }

/// The CPU path's checks of rollout_last_row_alibi (cf/rollout/rollout.hpp).
void check_alibi(const rollout::AlibiModel& model, const Eigen::VectorXd& alpha, long n) {
  rollout::validate_model(model);
  require(n >= 1, "rollout: n >= 1 required, got ", n);
  rollout::validate_alpha(alpha, static_cast<int>(alpha.size()));
  require(model.delta.rows() <= 1 || model.delta.rows() == alpha.size(), "rollout: delta has ", model.delta.rows(),
          " layers but the schedule has L = ", alpha.size());
  require(model.layer_slopes.empty() || static_cast<long>(model.layer_slopes.size()) == alpha.size(),
          "rollout: per-layer slopes for ", model.layer_slopes.size(),
          " layers but the schedule has L = ", alpha.size());
  require(model.layer_head_weights.empty() || static_cast<long>(model.layer_head_weights.size()) == alpha.size(),
          "rollout: per-layer head weights for ", model.layer_head_weights.size(),
          " layers but the schedule has L = ", alpha.size());
}

/// The CPU path's checks of rollout_last_row_dense (n range, schedule).
void check_dense(const Eigen::VectorXd& alpha, long n) {
  require(n >= 1, "rollout: n >= 1 required, got ", n);
  require(n <= rollout::kDenseMaxN, "rollout: the dense path needs n <= ", rollout::kDenseMaxN,
          " (n^2 memory, L n^2 time), got n = ", n, "; use a structured (ALiBi) kernel for larger n");
  rollout::validate_alpha(alpha, static_cast<int>(alpha.size()));
}

template <bool Emulated>
class DeviceRollout final : public rollout::LastRowBackend {
 public:
  Eigen::VectorXd alibi(const rollout::AlibiModel& model, const Eigen::VectorXd& alpha, long n) const override {
    check_alibi(model, alpha, n);
    const int H = static_cast<int>(model.slopes.size()), L = static_cast<int>(alpha.size());
    std::vector<double> slopes, deltas, weights;  // [L, H], layer by layer
    for (int l = 0; l < L; ++l) {
      const std::vector<double>& s = rollout::model_slopes(model, l);
      const std::vector<double> w = rollout::model_head_weights(model, l);
      require(static_cast<int>(s.size()) == H && static_cast<int>(w.size()) == H, "rollout: layer ", l + 1, " has ",
              s.size(), " slopes and ", w.size(), " head weights for H = ", H, " heads");
      slopes.insert(slopes.end(), s.begin(), s.end());
      weights.insert(weights.end(), w.begin(), w.end());
      for (int h = 0; h < H; ++h) deltas.push_back(rollout::model_delta(model, l, h));
    }
    const auto run = Emulated ? &emu::alibi_rollout_last_row : &cuda_alibi;
    const std::vector<double> v = run(slopes, deltas, weights, to_std(alpha), H, model.mask.window, n, 1LL << 27);
    return Eigen::Map<const Eigen::VectorXd>(v.data(), static_cast<Eigen::Index>(v.size()));
  }

  Eigen::VectorXd dense(const rollout::KernelFn& kernel, const Eigen::VectorXd& alpha, long n) const override {
    check_dense(alpha, n);
    rollout::RowMatrix A;
    const auto get = [&](int l) -> const double* {
      A = kernel(l);
      require(A.rows() == n && A.cols() == n, "rollout: kernel of layer ", l + 1, " is ", A.rows(), " x ", A.cols(),
              ", expected n x n with n = ", n);
      return A.data();
    };
    const auto run = Emulated ? &emu::dense_rollout_last_row : &cuda_dense;
    const std::vector<double> v = run(get, to_std(alpha), n);
    return Eigen::Map<const Eigen::VectorXd>(v.data(), static_cast<Eigen::Index>(v.size()));
  }

 private:
  // the CUDA build's loops, or a refusal where this binary has none
  static std::vector<double> cuda_alibi(const std::vector<double>& s, const std::vector<double>& d,
                                        const std::vector<double>& w, const std::vector<double>& a, int H,
                                        std::int64_t window, std::int64_t n, std::int64_t limit) {
#if CF_GPU_HAVE_CUDA
    return cuda::alibi_rollout_last_row(s, d, w, a, H, window, n, limit);
#else
    (void)s, (void)d, (void)w, (void)a, (void)H, (void)window, (void)n, (void)limit;
    throw InvalidArgument("--device cuda: this build has no CUDA path");
#endif
  }
  static std::vector<double> cuda_dense(const std::function<const double*(int)>& k, const std::vector<double>& a,
                                        std::int64_t n) {
#if CF_GPU_HAVE_CUDA
    return cuda::dense_rollout_last_row(k, a, n);
#else
    (void)k, (void)a, (void)n;
    throw InvalidArgument("--device cuda: this build has no CUDA path");
#endif
  }
};

/// The kernel products and triple sums of cf/rollout/product_backend.hpp on the device: lib/rollout
/// has checked the kernels' shapes; here they are flattened to the loops' arrays.
template <bool Emulated>
class DeviceProducts final : public rollout::ProductBackend {
 public:
  rollout::RowMatrix left_product(const rollout::KernelFn& kernel, const std::vector<rollout::LeftStep>& steps,
                                  const rollout::RowMatrix& start, long record_row,
                                  Eigen::MatrixXd* rows) const override {
    const long n = start.rows();
    require(start.cols() == n, "left product: the start is ", n, " x ", start.cols(), ", expected square");
    require(!rows || (record_row >= 0 && record_row < n), "left product: row ", record_row, " to record, n = ", n);
    std::vector<double> keep, mix;
    for (const rollout::LeftStep& f : steps) keep.push_back(f.keep), mix.push_back(f.mix);
    rollout::RowMatrix A;
    const auto get = [&](int t) -> const double* {
      A = kernel(t);
      require(A.rows() == n && A.cols() == n, "left product: factor ", t + 1, " is ", A.rows(), " x ", A.cols(),
              ", expected ", n, " x ", n);
      return A.data();
    };
    const std::vector<double> x0(start.data(), start.data() + start.size());
    std::vector<double> kept;
    const auto run = Emulated ? &emu::dense_left_product : &cuda_left_product;
    const std::vector<double> x = run(get, keep, mix, x0, n, rows ? record_row : -1, rows ? &kept : nullptr);
    if (rows) *rows = Eigen::Map<const rollout::RowMatrix>(kept.data(), static_cast<Eigen::Index>(steps.size() + 1), n);
    return Eigen::Map<const rollout::RowMatrix>(x.data(), n, n);
  }

  rollout::GapSums gap_sums(const rollout::RowMatrix& K, double tol) const override {
    const double lowest = rollout::GapSums{}.max_gap;
    return Emulated ? to_sums(emu::prefix_gap_sums(K.data(), K.rows(), tol, lowest))
                    : cuda_gap_sums(K.data(), K.rows(), tol, lowest);
  }

 private:
  template <class S>
  static rollout::GapSums to_sums(const S& g) {
    return {g.violations, g.violating_gap_sum, g.max_gap};
  }
  static std::vector<double> cuda_left_product(const std::function<const double*(int)>& k,
                                               const std::vector<double>& keep, const std::vector<double>& mix,
                                               const std::vector<double>& x0, std::int64_t n, std::int64_t row,
                                               std::vector<double>* rows) {
#if CF_GPU_HAVE_CUDA
    return cuda::dense_left_product(k, keep, mix, x0, n, row, rows);
#else
    (void)k, (void)keep, (void)mix, (void)x0, (void)n, (void)row, (void)rows;
    throw InvalidArgument("--device cuda: this build has no CUDA path");
#endif
  }
  static rollout::GapSums cuda_gap_sums(const double* K, std::int64_t n, double tol, double lowest) {
#if CF_GPU_HAVE_CUDA
    return to_sums(cuda::prefix_gap_sums(K, n, tol, lowest));
#else
    (void)K, (void)n, (void)tol, (void)lowest;
    throw InvalidArgument("--device cuda: this build has no CUDA path");
#endif
  }
};

}  // namespace

std::unique_ptr<rollout::LastRowBackend> make_rollout_backend(Placement b) {
  if (b == Placement::Emulated) return std::make_unique<DeviceRollout<true>>();
  if (b == Placement::Cuda) return std::make_unique<DeviceRollout<false>>();
  return nullptr;
}

std::unique_ptr<rollout::ProductBackend> make_product_backend(Placement b) {
  if (b == Placement::Emulated) return std::make_unique<DeviceProducts<true>>();
  if (b == Placement::Cuda) return std::make_unique<DeviceProducts<false>>();
  return nullptr;
}

}  // namespace cf::gpu
