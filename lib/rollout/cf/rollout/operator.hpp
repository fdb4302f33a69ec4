#pragma once
// Kernel operators of the rollout (issue 28): every source of expected kernels Abar(l) is a type
// that applies v <- v Abar(l) (Position bias (Herasimchyk et al.) Eqs. 1-3, docs/spec.md section 2),
// and one loop (rollout_last_row) runs the residual-aware rollout over any of them:
//   StoredKernels     dense n x n kernels held by the caller: a kernel file or the measured kernels
//                     of a capture (read_kernel_file, read_capture_kernels), 1 or L of them;
//   GeneratedKernels  dense kernels made per layer by a function (tests, custom kernels);
//   AlibiDenseKernels a structured ALiBi model built dense per layer (the O(L H n^2) oracle);
//   AlibiKernels      a structured ALiBi model (causal or sliding window) applied in O(H n) per
//                     layer without forming Abar (suffix recurrences, rollout_structured.cpp).
// A new kind of kernel is one more KernelOperator; the loop, the residual schedule and the checks
// stay where they are. Nothing here is global: the windowed sweep's buffer limit is an option of
// the operator (RolloutOptions).
#include <Eigen/Dense>
#include <functional>
#include <memory>
#include <vector>

#include "cf/rollout/kernel.hpp"

namespace cf::rollout {

/// Kernel provider for the dense path: returns Abar(l) (n x n, row-stochastic) for l in [0, L).
using KernelFn = std::function<RowMatrix(int l)>;

/// Largest n accepted by the dense paths (memory n^2 doubles, time L H n^2): 8192.
constexpr long kDenseMaxN = 8192;

/// Options of the structured operator.
struct RolloutOptions {
  /// Largest (w - 1) x heads buffer (in doubles) of the windowed structured sweep; beyond it heads
  /// are processed in chunks (same result). 2^24 doubles = 128 MB.
  double window_buffer_doubles = 16777216.0;
};

/// One source of expected kernels Abar(1..L) over n positions.
class KernelOperator {
 public:
  virtual ~KernelOperator() = default;
  /// Throws cf::InvalidArgument unless the operator can run the schedule `alpha` (L entries in
  /// [0, 1], kernel counts and shapes, n limits); called once by rollout_last_row before any work.
  virtual void check(const Eigen::VectorXd& alpha) const = 0;
  /// The number of positions n (after check).
  virtual long size() const = 0;
  /// out = v Abar(l + 1) (row vector times kernel), v and out with n entries; l in [0, L), called
  /// newest layer first.
  virtual void apply_left(int l, const Eigen::VectorXd& v, Eigen::VectorXd& out) = 0;
  /// Whether the whole rollout runs with subnormal doubles flushed to zero (the dense products:
  /// subnormals slow them ~100x; results change only below 2.2e-308). The structured sweeps flush
  /// inside apply_left.
  virtual bool flush_denormals() const { return false; }
  /// A progress line on terminals ("dense rollout: layers"), or null for none.
  virtual const char* progress_label() const { return nullptr; }
};

/// Last row of P(L) = R(L) ... R(1), R(l) = (1 - alpha_l) I + alpha_l Abar(l): v = e_{n-1}^T, then
/// v <- (1 - alpha_l) v + alpha_l v Abar(l) for l = L..1 (newest layer first; layers with
/// alpha_l = 0 are skipped). The one rollout loop of every path.
Eigen::VectorXd rollout_last_row(KernelOperator& op, const Eigen::VectorXd& alpha);

/// Dense kernels held by the caller (kernels.size() == L, kernels[l] = Abar(l+1), or 1: the same
/// kernel at every layer), each n x n; a kernel file or a capture's measured kernels. Keeps a
/// reference (no copies): the kernels must outlive the operator.
class StoredKernels final : public KernelOperator {
 public:
  explicit StoredKernels(const std::vector<RowMatrix>& kernels) : k_(kernels) {}
  explicit StoredKernels(std::vector<RowMatrix>&&) = delete;
  void check(const Eigen::VectorXd& alpha) const override;
  long size() const override;
  void apply_left(int l, const Eigen::VectorXd& v, Eigen::VectorXd& out) override;
  bool flush_denormals() const override { return true; }
  const char* progress_label() const override { return "dense rollout: layers"; }

 private:
  const std::vector<RowMatrix>& k_;
};

/// Dense kernels made per layer by `kernel(l)` (n x n each), one at a time.
class GeneratedKernels final : public KernelOperator {
 public:
  GeneratedKernels(KernelFn kernel, long n) : f_(std::move(kernel)), n_(n) {}
  void check(const Eigen::VectorXd& alpha) const override;
  long size() const override { return n_; }
  void apply_left(int l, const Eigen::VectorXd& v, Eigen::VectorXd& out) override;
  bool flush_denormals() const override { return true; }
  const char* progress_label() const override { return "dense rollout: layers"; }

 private:
  KernelFn f_;
  long n_;
  RowMatrix buf_;
};

/// A structured ALiBi model built dense per layer (alibi_kernel_dense_into, one reused buffer):
/// the O(L H n^2) oracle of AlibiKernels. Keeps a reference to the model.
class AlibiDenseKernels final : public KernelOperator {
 public:
  AlibiDenseKernels(const AlibiModel& model, long n) : m_(model), n_(n) {}
  AlibiDenseKernels(AlibiModel&&, long) = delete;
  void check(const Eigen::VectorXd& alpha) const override;
  long size() const override { return n_; }
  void apply_left(int l, const Eigen::VectorXd& v, Eigen::VectorXd& out) override;
  bool flush_denormals() const override { return true; }
  const char* progress_label() const override { return "dense rollout: layers"; }

 private:
  const AlibiModel& m_;
  long n_;
  RowMatrix buf_;
};

/// A structured ALiBi model (causal or sliding-window mask, constant-plus-diagonal content) in
/// O(H n) time per layer and O(n + H K) memory, where K is the number of leading rows whose
/// normaliser still varies (about 40/min slope, capped by n and the window); agrees with
/// AlibiDenseKernels to ~1e-13 relative. Layers with the same kernel share one table. Keeps a
/// reference to the model.
class AlibiKernels final : public KernelOperator {
 public:
  AlibiKernels(const AlibiModel& model, long n, RolloutOptions o = {});
  AlibiKernels(AlibiModel&&, long, RolloutOptions = {}) = delete;
  ~AlibiKernels() override;
  /// Validates the model, n >= 1, alpha, and the per-layer content, slopes and weights against L.
  void check(const Eigen::VectorXd& alpha) const override;
  long size() const override { return n_; }
  void apply_left(int l, const Eigen::VectorXd& v, Eigen::VectorXd& out) override;

 private:
  struct State;  // the current layer's tables and the sweep's scratch (rollout_structured.cpp)
  const AlibiModel& m_;
  long n_;
  RolloutOptions o_;
  std::unique_ptr<State> s_;
};

}  // namespace cf::rollout
