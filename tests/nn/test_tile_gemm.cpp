// The packing-free tile products of the tiled attention (cf/nn/detail/tile_gemm.hpp, issue 12)
// against a naive triple loop in long double (the oracle), at ragged sizes around the 4-row and
// 1-4-vector blocks, with strides wider than the rows, and the transposed-key buffers they read.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <vector>

#include "cf/nn/detail/tile_gemm.hpp"
#include "cf/nn/detail/variants/score_policy.hpp"

using namespace cf::nn::detail;

namespace {

template <class T>
std::vector<T> random_vec(std::size_t n, std::mt19937& g) {
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<T> v(n);
  for (auto& x : v) x = T(u(g));
  return v;
}

template <class T>
double tol() {
  return sizeof(T) == 4 ? 2e-5 : 1e-13;
}

template <class T>
void check_nt(int m, int n, int k, std::mt19937& g) {
  constexpr int W = TileVec<T>::W;
  const std::int64_t lda = k + 3, ldb = n + kTransposePad<T> + 5, ldc = n + 7;
  const auto A = random_vec<T>(static_cast<std::size_t>(m) * lda, g);
  const auto Bt = random_vec<T>(static_cast<std::size_t>(k) * ldb, g);
  std::vector<T> C(static_cast<std::size_t>(m) * ldc, T(-7));
  const T alpha = T(0.37);
  nt_product(m, n, k, A.data(), lda, Bt.data(), ldb, C.data(), ldc, alpha);
  double err = 0;
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      long double s = 0;
      for (int e = 0; e < k; ++e) s += static_cast<long double>(A[i * lda + e]) * Bt[e * ldb + j];
      err = std::max(err, static_cast<double>(std::abs(static_cast<long double>(alpha) * s - C[i * ldc + j])));
    }
    for (std::int64_t j = n; j < ldc; ++j) REQUIRE(C[i * ldc + j] == T(-7));  // nothing past column n
  }
  INFO("nt m " << m << " n " << n << " k " << k << " W " << W);
  CHECK(err < tol<T>() * k);
}

template <class T>
void check_nn(int m, int n, int k, bool transposed_a, std::mt19937& g) {
  const std::int64_t lda = transposed_a ? m + 2 : k + 2, ldb = n + 5, ldc = n + 3;
  const std::int64_t sa_i = transposed_a ? 1 : lda, sa_p = transposed_a ? lda : 1;
  const auto A = random_vec<T>(static_cast<std::size_t>(transposed_a ? k : m) * lda, g);
  const auto B = random_vec<T>(static_cast<std::size_t>(k) * ldb, g);
  auto C = random_vec<T>(static_cast<std::size_t>(m) * ldc, g);
  const auto C0 = C;
  const T alpha = T(-1.25);
  nn_product_acc(m, n, k, A.data(), sa_i, sa_p, B.data(), ldb, C.data(), ldc, alpha);
  double err = 0;
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      long double s = 0;
      for (int p = 0; p < k; ++p) s += static_cast<long double>(A[i * sa_i + p * sa_p]) * B[p * ldb + j];
      err = std::max(
          err, static_cast<double>(std::abs(C0[i * ldc + j] + static_cast<long double>(alpha) * s - C[i * ldc + j])));
    }
    for (std::int64_t j = n; j < ldc; ++j) REQUIRE(C[i * ldc + j] == C0[i * ldc + j]);
  }
  INFO("nn m " << m << " n " << n << " k " << k << " transposed A " << transposed_a);
  CHECK(err < tol<T>() * (k + 1));
}

template <class T>
void check_all() {
  constexpr int W = TileVec<T>::W;
  std::mt19937 g(42);
  // m 13 and 17: blocks of 8 rows (narrow n), then 4, then single rows; n 5W and 13W - 3: column
  // blocks 4 + 3 + 2 (never a lone 1-vector block after a 4)
  for (int m : {1, 3, 4, 5, 13, 16, 17})
    for (int n : {1, W - 1, W, W + 1, 2 * W + 3, 3 * W, 4 * W, 5 * W - 2, 5 * W, 9 * W - 1, 9 * W, 13 * W - 3})
      for (int k : {1, 8, 64}) check_nt<T>(m, n, k, g);
  for (int m : {1, 4, 7, 16, 143})
    for (int n : {W, 2 * W, 3 * W, 4 * W, 5 * W, 8 * W})
      for (int k : {1, 16, 33})
        for (bool tr : {false, true}) check_nn<T>(m, n, k, tr, g);
}

}  // namespace

TEST_CASE("Tile products (packing-free, register-blocked) equal a long-double triple loop, float and double",
          "[nn][tiled][tile_gemm]") {
  check_all<float>();
  check_all<double>();
  CHECK(tile_gemm_ok<float>(64));
  CHECK(tile_gemm_ok<float>(128));
  CHECK_FALSE(tile_gemm_ok<float>(8));  // not a whole vector: the callers keep Eigen's products
  CHECK(tile_gemm_ok<double>(8));
  CHECK_FALSE(tile_gemm_ok<double>(12));
}

TEST_CASE("Transposed keys: runs of visited keys, zero slack after the last column", "[nn][tiled][tile_gemm]") {
  std::mt19937 g(7);
  const int Tn = 100, dh = 16;
  const std::int64_t ldx = 3 * dh;
  const auto X = random_vec<float>(static_cast<std::size_t>(Tn) * ldx, g);
  KeysT<float> kt;
  kt.build(X.data(), ldx, dh, {{0, 10}, {5, 20}, {20, 24}, {40, 57}, {90, 100}});
  REQUIRE(kt.runs.size() == 3);           // [0, 24) (overlapping and adjacent spans), [40, 57), [90, 100)
  CHECK(kt.ld % TileVec<float>::W == 0);  // whole vectors per row: aligned rows
  for (int j : {0, 9, 19, 23, 40, 56, 90, 99}) {
    const float* c = kt.col(j);
    REQUIRE(c != nullptr);
    for (int e = 0; e < dh; ++e) CHECK(c[e * kt.ld] == X[j * ldx + e]);
  }
  CHECK(kt.col(30) == nullptr);
  CHECK(kt.col(100) == nullptr);
  const std::int64_t cols = 24 + 17 + 10;
  for (int e = 0; e < dh; ++e)
    for (std::int64_t c = cols; c < kt.ld; ++c) CHECK(kt.data[static_cast<std::size_t>(e * kt.ld + c)] == 0.f);
}

// transpose_keys moves whole W x W blocks through register shuffles and the ragged edges one by
// one; the oracle is the definition out[e ldo + c] = X[(j0 + c) ldx + e], element by element.
template <class T>
void check_transpose_keys(std::mt19937& g) {
  constexpr int W = TileVec<T>::W;
  for (int dh : {1, W - 1, W, W + 3, 2 * W, 4 * W})
    for (int n : {1, W - 1, W, W + 1, 3 * W + 5, 8 * W})
      for (int j0 : {0, 3, W}) {
        const std::int64_t ldx = dh + 5, ldo = n + kTransposePad<T> + 2;
        const auto X = random_vec<T>(static_cast<std::size_t>(j0 + n) * ldx, g);
        std::vector<T> out(static_cast<std::size_t>(ldo) * dh, T(7));
        transpose_keys(X.data(), ldx, j0, n, dh, out.data(), ldo);
        int bad = 0;
        for (int e = 0; e < dh; ++e) {
          for (int c = 0; c < n; ++c) bad += out[e * ldo + c] != X[(j0 + c) * ldx + e];
          for (int c = n; c < n + kTransposePad<T>; ++c) bad += out[e * ldo + c] != T(0);
          for (std::int64_t c = n + kTransposePad<T>; c < ldo; ++c) bad += out[e * ldo + c] != T(7);  // untouched
        }
        INFO("dh " << dh << " n " << n << " j0 " << j0);
        CHECK(bad == 0);
      }
}

TEST_CASE("Key transpose (register blocks and ragged edges) equals its definition, float and double",
          "[nn][tiled][tile_gemm]") {
  std::mt19937 g(11);
  check_transpose_keys<float>(g);
  check_transpose_keys<double>(g);
}
