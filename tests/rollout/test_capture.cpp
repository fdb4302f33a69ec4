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
