// The measured-alpha seam for causalflow captures (docs/checkpoint_format.md): /alpha_token_mean
// [L] and /alpha_frobenius [L] read with the HDF5 C API.
#include <hdf5.h>

#include <catch2/catch.hpp>
#include <cstdio>

#include "cf/core/error.hpp"
#include "cf/rollout/preset.hpp"

using namespace cf::rollout;

TEST_CASE("Capture alpha datasets are read from HDF5 and validated", "[rollout]") {
  const std::string path = "rollout_test_capture.h5";
  const double vals[4] = {0.5, 0.25, 0.125, 1.0};
  {
    const hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    REQUIRE(f >= 0);
    const hsize_t dim = 4;
    const hid_t sp = H5Screate_simple(1, &dim, nullptr);
    const hid_t ds = H5Dcreate2(f, "/alpha_token_mean", H5T_IEEE_F64LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, vals);
    H5Dclose(ds);
    H5Sclose(sp);
    H5Fclose(f);
  }
  const Eigen::VectorXd a = read_capture_alpha(path);
  REQUIRE(a.size() == 4);
  for (int i = 0; i < 4; ++i) CHECK(a(i) == vals[i]);
  CHECK_NOTHROW(validate_alpha(a, 4));
  CHECK_THROWS_AS(read_capture_alpha(path, "/alpha_frobenius"), cf::InvalidArgument);
  std::remove(path.c_str());
  CHECK_THROWS_AS(read_capture_alpha("no_such_file.h5"), cf::InvalidArgument);
}

#include "cf/io/hdf5.hpp"
#include "cf/rollout/kernel.hpp"
#include "cf/rollout/source.hpp"

TEST_CASE("A capture missing a layer is refused, never filled with layer 0's kernel", "[rollout][capture]") {
  const std::string path = "rollout_test_capture_gap.h5";
  const std::vector<float> probs = {1, 0, 0, 0.5f, 0.5f, 0, 0.2f, 0.3f, 0.5f};  // [1, 1, 3, 3]
  auto make = [&](bool with_gap) {
    cf::io::File f = cf::io::File::create(path);
    f.set_attr("format", "causalflow-capture");
    f.set_attr("config", R"({"n_layer": 3, "n_head": 1})");
    for (int l = 0; l < 3; ++l)
      if (!(with_gap && l == 1)) f.require_group("layer_" + std::to_string(l)).write("attn_probs", probs, {1, 1, 3, 3});
    f.write("alpha_token_mean", std::vector<double>{0.5, 0.5, 0.5}, {3});
  };
  make(false);
  CHECK(read_capture_kernels(path).size() == 3);
  SourceOptions o;
  o.model = path;
  CHECK(make_source(o, 0).kernels.size() == 3);
  make(true);
  try {
    read_capture_kernels(path);
    FAIL("a capture without layer_1 was accepted");
  } catch (const cf::InvalidArgument& e) {
    CHECK(std::string(e.what()).find("layer_1") != std::string::npos);
  }
  CHECK_THROWS_AS(make_source(o, 0), cf::InvalidArgument);
  std::remove(path.c_str());
}
