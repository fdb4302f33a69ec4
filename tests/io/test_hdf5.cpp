// Tests for cf/io/hdf5.hpp: round trips of every element type and shape, Eigen layout
// conversion, groups, attributes, h5py compatibility, error messages for missing / foreign /
// truncated files, and the atomic writer.
#include <hdf5.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <Eigen/Dense>
#include <catch2/catch.hpp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "cf/core/atomic_file.hpp"
#include "cf/core/error.hpp"
#include "cf/io/hdf5.hpp"

using cf::io::File;
using cf::io::Shape;

namespace {
std::string tmp_path(const std::string& name) { return "/tmp/cf_test_io_" + std::to_string(::getpid()) + "_" + name; }

bool file_exists(const std::string& p) { return ::access(p.c_str(), F_OK) == 0; }

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const cf::InvalidArgument& e) {
    return e.what();
  }
  return "<no cf::InvalidArgument thrown>";
}
}  // namespace

TEST_CASE("hdf5 round trip of float32, float64 and int64 tensors keeps shapes and values", "[io]") {
  const std::string path = tmp_path("roundtrip.h5");
  std::vector<float> f(2 * 3 * 4);
  for (std::size_t i = 0; i < f.size(); ++i) f[i] = 0.25f * static_cast<float>(i) - 1.5f;
  std::vector<double> d = {1.0 / 3.0, -2.5e-300, 7.0};
  std::vector<std::int64_t> n = {-(std::int64_t(1) << 40), 0, 50256, 9};
  {
    File file = File::create(path);
    file.write("f32", f, Shape{2, 3, 4});
    file.write("f64", d, Shape{3});
    file.write("i64", n, Shape{2, 2});
    file.write("scalar", std::vector<double>{42.5}, Shape{});
    file.write("empty", std::vector<float>{}, Shape{0, 5});
  }
  File file = File::open(path);
  auto rf = file.read<float>("f32");
  CHECK(rf.shape == Shape{2, 3, 4});
  CHECK(rf.data == f);
  auto rd = file.read<double>("f64");
  CHECK(rd.shape == Shape{3});
  CHECK(rd.data == d);  // float64 is stored exactly
  auto rn = file.read<std::int64_t>("i64");
  CHECK(rn.shape == Shape{2, 2});
  CHECK(rn.data == n);
  auto rs = file.read<double>("scalar");
  CHECK(rs.shape.empty());
  CHECK(rs.data == std::vector<double>{42.5});
  CHECK(file.dataset_shape("empty") == Shape{0, 5});
  CHECK(file.read<float>("empty").data.empty());
  // float32 widens exactly to double
  auto wide = file.read<double>("f32");
  for (std::size_t i = 0; i < f.size(); ++i) CHECK(wide.data[i] == static_cast<double>(f[i]));
  CHECK(file.list_datasets() == std::vector<std::string>{"empty", "f32", "f64", "i64", "scalar"});
  std::remove(path.c_str());
}

TEST_CASE("hdf5 Eigen matrices are stored row-major whatever their storage order", "[io]") {
  const std::string path = tmp_path("eigen.h5");
  Eigen::MatrixXf colmajor(2, 3);
  colmajor << 1, 2, 3, 4, 5, 6;
  cf::io::RowMatrix<double> rowmajor(3, 2);
  rowmajor << 1.5, 2.5, 3.5, 4.5, 5.5, 6.5;
  Eigen::VectorXd v = Eigen::VectorXd::LinSpaced(5, 0.0, 1.0);
  {
    File file = File::create(path);
    file.write_matrix("cm", colmajor);
    file.write_matrix("rm", rowmajor);
    file.write_matrix("expr", colmajor.transpose() * 2.0f);
    file.write_vector("v", v);
  }
  File file = File::open(path);
  // The raw buffer must be row-major: element (r, c) at r * cols + c.
  auto raw = file.read<float>("cm");
  CHECK(raw.shape == Shape{2, 3});
  CHECK(raw.data == std::vector<float>{1, 2, 3, 4, 5, 6});
  Eigen::MatrixXf back = file.read_matrix<float>("cm");  // converts to column-major on assignment
  CHECK(back == colmajor);
  CHECK(file.read_matrix<double>("rm") == rowmajor);
  Eigen::MatrixXf expr = file.read_matrix<float>("expr");
  CHECK(expr == (colmajor.transpose() * 2.0f));
  CHECK(file.read_vector<double>("v") == v);
  CHECK_THROWS_WITH(file.read_matrix<float>("v"), Catch::Contains("expected a matrix (rank 2)"));
  CHECK_THROWS_WITH(file.read_vector<float>("cm"), Catch::Contains("expected a vector (rank 1)"));
  std::remove(path.c_str());
}

TEST_CASE("hdf5 groups, nested paths and dataset listing", "[io]") {
  const std::string path = tmp_path("groups.h5");
  {
    File file = File::create(path);
    auto params = file.create_group("params");
    params.write("h.0.attn.c_attn.weight", std::vector<float>(12, 1.0f), Shape{3, 4});
    params.write("wte.weight", std::vector<float>(6, 2.0f), Shape{2, 3});
    auto m = file.require_group("optim/m");  // intermediate groups created
    m.write("wte.weight", std::vector<float>(6, 0.0f), Shape{2, 3});
    file.write("layer_0/q", std::vector<float>(8, 0.5f), Shape{1, 2, 2, 2});  // path with a group
    CHECK_THROWS_WITH(file.create_group("params"), Catch::Contains("the name exists"));
    CHECK(file.require_group("params").name() == "/params");
  }
  File file = File::open(path);
  CHECK(file.list_groups() == std::vector<std::string>{"layer_0", "optim", "params"});
  CHECK(file.list_datasets().empty());
  auto params = file.open_group("params");
  CHECK(params.list_datasets() == std::vector<std::string>{"h.0.attn.c_attn.weight", "wte.weight"});
  CHECK(file.has("optim/m/wte.weight"));
  CHECK_FALSE(file.has("optim/v/wte.weight"));
  CHECK_FALSE(file.has("nothing/at/all"));
  CHECK(file.open_group("optim").open_group("m").dataset_shape("wte.weight") == Shape{2, 3});
  CHECK(file.dataset_shape("layer_0/q") == Shape{1, 2, 2, 2});
  CHECK_THROWS_WITH(file.open_group("missing"), Catch::Contains("has no group '/missing'"));
  CHECK_THROWS_WITH(params.read<float>("nope"), Catch::Contains("has no dataset '/params/nope'"));
  CHECK_THROWS_WITH(file.open_group("layer_0/q"), Catch::Contains("is not a group"));
  CHECK_THROWS_WITH(file.dataset_shape("params"), Catch::Contains("is not a dataset"));
  std::remove(path.c_str());
}

TEST_CASE("hdf5 string, integer and double attributes", "[io]") {
  const std::string path = tmp_path("attrs.h5");
  const std::string json = R"({"n_layer": 4, "name": "caf\u00e9 \u2192 ok"})";
  {
    File file = File::create(path);
    file.set_attr("format", "causalflow-checkpoint");
    file.set_attr("config", json);
    file.set_attr("format_version", 1);
    file.set_attr("step", std::int64_t(1) << 40);
    file.set_attr("best_val_loss", 1.25);
    file.set_attr("step", std::int64_t(7));  // replaced
    auto g = file.create_group("layer_3");
    g.set_attr("alpha_token_mean", 0.125);
    g.write("x", std::vector<float>{1}, Shape{1});
    CHECK_THROWS_AS(g.write("y", std::vector<float>{1, 2}, Shape{3}), cf::InvalidArgument);
  }
  File file = File::open(path);
  CHECK(file.attr_string("format") == "causalflow-checkpoint");
  CHECK(file.attr_string("config") == json);
  CHECK(file.attr_int("format_version") == 1);
  CHECK(file.attr_int("step") == 7);
  CHECK(file.attr_double("best_val_loss") == 1.25);
  CHECK(file.attr_double("step") == 7.0);
  CHECK(file.open_group("layer_3").attr_double("alpha_token_mean") == 0.125);
  CHECK(file.has_attr("config"));
  CHECK_FALSE(file.has_attr("nothing"));
  CHECK_THROWS_WITH(file.attr_int("format"), Catch::Contains("is not an integer"));
  CHECK_THROWS_WITH(file.attr_string("step"), Catch::Contains("is not a string"));
  CHECK_THROWS_WITH(file.attr_double("nothing"), Catch::Contains("has no attribute 'nothing'"));
  CHECK_THROWS_WITH(file.read<std::int64_t>("layer_3/x"), Catch::Contains("expected integer"));
  std::remove(path.c_str());
}

TEST_CASE("hdf5 files written here open in h5py with the same shapes and values", "[io][h5py]") {
  // python3-h5py is a Debian package: use the system interpreter, not a python3 first on PATH.
  if (::access("/usr/bin/python3", X_OK) != 0 ||
      std::system("/usr/bin/python3 -c 'import h5py' >/dev/null 2>&1") != 0) {
    WARN("skipped: /usr/bin/python3 with h5py is not available (apt install python3-h5py)");
    return;
  }
  const std::string path = tmp_path("h5py.h5");
  Eigen::MatrixXf w(3, 4);  // column-major in memory; h5py must see w[i, j] = 10 i + j
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) w(i, j) = static_cast<float>(10 * i + j);
  cf::io::write_hdf5_atomic(path, [&](File& f) {
    f.set_attr("format", "causalflow-checkpoint");
    f.set_attr("step", 12);
    f.set_attr("best_val_loss", 2.5);
    f.create_group("params").write_matrix("h.0.mlp.c_fc.weight", w);
    std::vector<std::int64_t> t(24);
    for (int i = 0; i < 24; ++i) t[i] = i;
    f.write("tokens", t, Shape{2, 3, 4});
  });
  const std::string script =
      "import h5py, numpy as np, sys\n"
      "f = h5py.File(sys.argv[1], 'r')\n"
      "w = f['params/h.0.mlp.c_fc.weight']\n"
      "assert w.shape == (3, 4), w.shape\n"
      "assert w.dtype == np.float32, w.dtype\n"
      "assert (w[()] == np.array([[10*i + j for j in range(4)] for i in range(3)])).all()\n"
      "t = f['tokens']\n"
      "assert t.shape == (2, 3, 4) and t.dtype == np.int64\n"
      "assert (t[()] == np.arange(24).reshape(2, 3, 4)).all()\n"
      "fmt = f.attrs['format']  # fixed-length string: h5py returns bytes\n"
      "assert isinstance(fmt, bytes) and fmt.decode() == 'causalflow-checkpoint', fmt\n"
      "assert h5py.check_string_dtype(f.attrs.get_id('format').dtype).length is not None\n"
      "assert f.attrs['step'] == 12 and f.attrs['best_val_loss'] == 2.5\n"
      "print('h5py ok')\n";
  const std::string script_path = tmp_path("check.py");
  cf::write_file_atomic(script_path, script);
  const int rc = std::system(("/usr/bin/python3 " + script_path + " " + path).c_str());
  CHECK(rc == 0);
  std::remove(script_path.c_str());
  std::remove(path.c_str());
}

TEST_CASE("hdf5 files written by h5py are read correctly", "[io][h5py]") {
  if (::access("/usr/bin/python3", X_OK) != 0 ||
      std::system("/usr/bin/python3 -c 'import h5py' >/dev/null 2>&1") != 0) {
    WARN("skipped: /usr/bin/python3 with h5py is not available (apt install python3-h5py)");
    return;
  }
  const std::string path = tmp_path("from_h5py.h5");
  const std::string cmd = "/usr/bin/python3 -c \"import h5py, numpy as np; f = h5py.File('" + path +
                          "', 'w'); "
                          "f['a'] = np.arange(6, dtype=np.float64).reshape(2, 3); f.attrs['s'] = 'fixed'; "
                          "f.attrs.create('fx', np.bytes_('abc')); f.create_group('g')['i'] = np.array([5, 6], "
                          "dtype=np.int32); f.close()\"";
  REQUIRE(std::system(cmd.c_str()) == 0);
  File f = File::open(path);
  Eigen::MatrixXd a = f.read_matrix<double>("a");
  CHECK(a.rows() == 2);
  CHECK(a(1, 2) == 5.0);
  CHECK(f.attr_string("s") == "fixed");
  CHECK(f.attr_string("fx") == "abc");
  CHECK(f.read<std::int64_t>("g/i").data == std::vector<std::int64_t>{5, 6});
  std::remove(path.c_str());
}

TEST_CASE("hdf5 open of a missing, empty, foreign or truncated file throws a clear error", "[io]") {
  const std::string missing = tmp_path("missing.h5");
  CHECK_THAT(error_of([&] { File::open(missing); }), Catch::Contains(missing) && Catch::Contains("no such file"));

  const std::string empty = tmp_path("empty.h5");
  cf::write_file_atomic(empty, "");
  CHECK_THAT(error_of([&] { File::open(empty); }), Catch::Contains(empty) && Catch::Contains("empty"));

  const std::string foreign = tmp_path("foreign.h5");
  cf::write_file_atomic(foreign, "PK\x03\x04 this is a zip, not HDF5");
  CHECK_THAT(error_of([&] { File::open(foreign); }), Catch::Contains(foreign) && Catch::Contains("not an HDF5 file"));
  CHECK_FALSE(cf::io::is_hdf5_file(foreign));

  const std::string good = tmp_path("good.h5");
  cf::io::write_hdf5_atomic(good, [](File& f) {
    f.set_attr("format", "x");
    f.write("big", std::vector<float>(20000, 1.0f), Shape{100, 200});
  });
  CHECK(cf::io::is_hdf5_file(good));
  const std::string bytes = cf::read_file(good);
  for (std::size_t keep : {std::size_t(4), std::size_t(100), bytes.size() / 2, bytes.size() - 1}) {
    const std::string truncated = tmp_path("trunc.h5");
    cf::write_file_atomic(truncated, bytes.substr(0, keep));
    const std::string msg = error_of([&] {
      File f = File::open(truncated);
      f.read<float>("big");  // if the header survived, the data read must fail cleanly
    });
    INFO("kept " << keep << " of " << bytes.size() << " bytes: " << msg);
    CHECK_THAT(msg, Catch::Contains(truncated));
    CHECK_THAT(msg, Catch::Contains("truncated") || Catch::Contains("not an HDF5 file"));
    std::remove(truncated.c_str());
  }
  for (const auto& p : {empty, foreign, good}) std::remove(p.c_str());
}

TEST_CASE("hdf5 atomic writer leaves the previous file intact when writing fails", "[io]") {
  const std::string path = tmp_path("atomic.h5");
  cf::io::write_hdf5_atomic(path, [](File& f) { f.set_attr("step", 1); });
  CHECK_THROWS_WITH(cf::io::write_hdf5_atomic(path,
                                              [](File& f) {
                                                f.set_attr("step", 2);
                                                f.write("x", std::vector<float>(4, 0.0f), Shape{2, 2});
                                                throw cf::Error("simulated crash during the write");
                                              }),
                    Catch::Contains("simulated crash"));
  CHECK(File::open(path).attr_int("step") == 1);
  CHECK_FALSE(file_exists(path + ".tmp." + std::to_string(::getpid())));
  cf::io::write_hdf5_atomic(path, [](File& f) { f.set_attr("step", 3); });
  CHECK(File::open(path).attr_int("step") == 3);
  // Writable reopen: add a dataset in place.
  {
    File f = File::open(path, true);
    f.write("added", std::vector<double>{1, 2}, Shape{2});
  }
  CHECK(File::open(path).read<double>("added").data == std::vector<double>{1, 2});
  std::remove(path.c_str());
}

TEST_CASE("hdf5 datasets filled and read in slices along the first dimension", "[io]") {
  const std::string path = tmp_path("rows.h5");
  // A capture-like tensor [N=3, H=2, T=2, T=2]: element value = its flat row-major index.
  std::vector<float> full(3 * 2 * 2 * 2);
  for (std::size_t i = 0; i < full.size(); ++i) full[i] = static_cast<float>(i);
  cf::io::write_hdf5_atomic(path, [&](File& f) {
    f.create_dataset<float>("layer_0/attn_probs", Shape{3, 2, 2, 2});
    f.write_rows("layer_0/attn_probs", 2, 1, full.data() + 16);  // out of order on purpose
    f.write_rows("layer_0/attn_probs", 0, 2, full.data());
    f.create_dataset<std::int64_t>("tokens", Shape{4, 3});
    const std::int64_t row[3] = {7, 8, 9};
    f.write_rows("tokens", 1, 1, row);
    CHECK_THROWS_WITH(f.write_rows("tokens", 3, 2, row), Catch::Contains("fall outside dimension 0"));
  });
  File f = File::open(path);
  CHECK(f.read<float>("layer_0/attn_probs").data == full);
  auto mid = f.read_rows<float>("layer_0/attn_probs", 1, 1);
  CHECK(mid.shape == Shape{1, 2, 2, 2});
  CHECK(mid.data == std::vector<float>(full.begin() + 8, full.begin() + 16));
  CHECK(f.read_rows<double>("layer_0/attn_probs", 1, 2).data.front() == 8.0);
  CHECK(f.read<std::int64_t>("tokens").data == std::vector<std::int64_t>{0, 0, 0, 7, 8, 9, 0, 0, 0, 0, 0, 0});
  CHECK(f.read_rows<float>("layer_0/attn_probs", 3, 0).data.empty());
  CHECK_THROWS_WITH(f.read_rows<float>("layer_0/attn_probs", 2, 2), Catch::Contains("rows [2, 4)"));
  std::remove(path.c_str());
}

TEST_CASE("hdf5 atomic writer killed mid-write leaves the previous file intact", "[io]") {
  // A child process rewrites the file slowly and is killed with SIGKILL in the middle of the
  // write; the target must still be the complete previous version (issue 4, acceptance 5).
  const std::string path = tmp_path("killed.h5");
  cf::io::write_hdf5_atomic(path, [](File& f) {
    f.set_attr("step", 1);
    f.write("w", std::vector<float>(1000, 1.0f), Shape{10, 100});
  });
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(fds[0]);
    try {
      cf::io::write_hdf5_atomic(path, [&](File& f) {
        f.set_attr("step", 2);
        std::vector<float> big(1 << 18, 2.0f);
        for (int i = 0;; ++i) {  // never finishes on its own
          f.write("x" + std::to_string(i), big, Shape{big.size()});
          if (i == 2) {
            const char c = 'w';
            if (::write(fds[1], &c, 1) != 1) ::_exit(3);
          }
          if (i > 4000) ::_exit(4);
        }
      });
    } catch (...) {
    }
    ::_exit(5);
  }
  ::close(fds[1]);
  char c = 0;
  REQUIRE(::read(fds[0], &c, 1) == 1);  // the child is inside the write
  ::close(fds[0]);
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  CHECK(WIFSIGNALED(status));
  File f = File::open(path);
  CHECK(f.attr_int("step") == 1);
  CHECK(f.read<float>("w").data == std::vector<float>(1000, 1.0f));
  CHECK(f.list_datasets() == std::vector<std::string>{"w"});
  const std::string tmp = path + ".tmp." + std::to_string(child);
  CHECK(file_exists(tmp));  // the interrupted temporary sibling, never renamed
  std::remove(tmp.c_str());
  std::remove(path.c_str());
}

namespace {
// Raw HDF5 helpers for files the project's writer never produces (mutated / foreign layouts).
void raw_attr(hid_t loc, const char* name, hid_t type, const std::vector<hsize_t>& dims, const void* data) {
  const hid_t space =
      dims.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  const hid_t a = H5Acreate2(loc, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
  REQUIRE(a >= 0);
  REQUIRE(H5Awrite(a, type, data) >= 0);
  H5Aclose(a);
  H5Sclose(space);
}
}  // namespace

TEST_CASE("hdf5 attribute readers refuse array-valued and non-standard attributes", "[io]") {
  // An array-valued `step` or `best_val_loss` used to be read into one scalar (stack overflow).
  const std::string path = tmp_path("array_attrs.h5");
  {
    File f = File::create(path);
    const hid_t id = static_cast<hid_t>(f.handle());
    const std::int64_t steps[3] = {1, 2, 3};
    const double losses[4] = {1, 2, 3, 4};
    raw_attr(id, "step", H5T_NATIVE_INT64, {3}, steps);
    raw_attr(id, "best_val_loss", H5T_NATIVE_DOUBLE, {2, 2}, losses);
    raw_attr(id, "one", H5T_NATIVE_DOUBLE, {1}, losses);  // shape [1] is one value: accepted
    const hid_t s3 = H5Tcopy(H5T_C_S1);
    H5Tset_size(s3, 3);
    raw_attr(id, "strings", s3, {2}, "abcdef");
    H5Tclose(s3);
    const hid_t bf = H5Tcopy(H5T_NATIVE_B8);  // a bit field is no number
    const unsigned char bits = 3;
    raw_attr(id, "bits", bf, {}, &bits);
    H5Tclose(bf);
    const hid_t odd = H5Tcopy(H5T_IEEE_F64LE);  // a custom float layout (40 bits in 8 bytes)
    H5Tset_fields(odd, 39, 30, 8, 0, 30);
    H5Tset_precision(odd, 40);
    raw_attr(id, "odd_float", odd, {}, losses);
    H5Tclose(odd);
  }
  File f = File::open(path);
  CHECK_THROWS_WITH(f.attr_int("step"),
                    Catch::Contains("'step'") && Catch::Contains("single value") && Catch::Contains("[3]"));
  CHECK_THROWS_WITH(f.attr_double("step"), Catch::Contains("single value"));
  CHECK_THROWS_WITH(f.attr_double("best_val_loss"), Catch::Contains("'best_val_loss'") && Catch::Contains("[2, 2]"));
  CHECK(f.attr_double("one") == 1.0);
  CHECK_THROWS_WITH(f.attr_string("strings"), Catch::Contains("single value"));
  CHECK_THROWS_WITH(f.attr_int("bits"), Catch::Contains("is not an integer"));
  CHECK_THROWS_WITH(f.attr_double("odd_float"), Catch::Contains("non-standard"));
  std::remove(path.c_str());
}

TEST_CASE("hdf5 dataset readers check rank, shape, element count, type and storage", "[io]") {
  const std::string path = tmp_path("odd_datasets.h5");
  {
    File f = File::create(path);
    const hid_t id = static_cast<hid_t>(f.handle());
    // a null dataspace (no data at all)
    hid_t space = H5Screate(H5S_NULL);
    hid_t ds = H5Dcreate2(id, "null", H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dclose(ds);
    H5Sclose(space);
    // a half-precision-like custom float
    const hid_t half = H5Tcopy(H5T_IEEE_F32LE);
    H5Tset_fields(half, 15, 10, 5, 0, 10);
    H5Tset_precision(half, 16);
    H5Tset_size(half, 2);
    H5Tset_ebias(half, 15);
    const hsize_t two = 2;
    space = H5Screate_simple(1, &two, nullptr);
    ds = H5Dcreate2(id, "half", half, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dclose(ds);
    H5Sclose(space);
    H5Tclose(half);
    // a string dataset
    const hid_t s4 = H5Tcopy(H5T_C_S1);
    H5Tset_size(s4, 4);
    space = H5Screate_simple(1, &two, nullptr);
    ds = H5Dcreate2(id, "text", s4, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dclose(ds);
    H5Sclose(space);
    H5Tclose(s4);
    f.write("m", std::vector<float>{1, 2, 3, 4, 5, 6}, Shape{2, 3});
  }
  File f = File::open(path);
  CHECK_THROWS_WITH(f.read<float>("null"), Catch::Contains("'/null'") && Catch::Contains("null"));
  CHECK_THROWS_WITH(f.read<float>("half"), Catch::Contains("non-standard"));
  CHECK_THROWS_WITH(f.read<double>("text"), Catch::Contains("non-numeric"));
  CHECK_THROWS_WITH(f.read_vector<float>("m"), Catch::Contains("rank 1"));
  std::vector<float> buf(6);
  CHECK_THROWS_WITH(f.read_into<float>("m", buf.data(), Shape{3, 2}),
                    Catch::Contains("[2, 3]") && Catch::Contains("[3, 2]"));
  CHECK(f.read_matrix<float>("m")(1, 2) == 6.f);
  std::remove(path.c_str());
}

TEST_CASE("hdf5 string attributes are written fixed-length (no variable-length strings)", "[io]") {
  const std::string path = tmp_path("fixed_strings.h5");
  {
    File f = File::create(path);
    f.set_attr("empty", std::string());
    f.set_attr("config", std::string(100000, 'x'));  // larger than 64 KiB
    f.set_attr("format", "causalflow-capture");
    CHECK_THROWS_AS(f.set_attr("nul", std::string("a\0b", 3)), cf::InvalidArgument);
  }
  File f = File::open(path);
  CHECK(f.attr_string("empty").empty());
  CHECK(f.attr_string("config") == std::string(100000, 'x'));
  CHECK(f.attr_string("format") == "causalflow-capture");
  for (const char* name : {"empty", "config", "format"}) {
    const hid_t a = H5Aopen(static_cast<hid_t>(f.handle()), name, H5P_DEFAULT);
    const hid_t t = H5Aget_type(a);
    CHECK(H5Tget_class(t) == H5T_STRING);
    CHECK(H5Tis_variable_str(t) == 0);
    H5Tclose(t);
    H5Aclose(a);
  }
  std::remove(path.c_str());
}

TEST_CASE("hdf5 signature found at offset 0 or a user-block offset, whatever the file name", "[io]") {
  const std::string plain = tmp_path("sig_noext"), ub = tmp_path("sig_userblock"), text = tmp_path("sig_text.h5");
  cf::io::write_hdf5_atomic(plain, [](File& f) { f.set_attr("format", "x"); });
  CHECK(cf::io::has_hdf5_signature(plain));
  {
    const hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
    H5Pset_userblock(fcpl, 1024);
    const hid_t f = H5Fcreate(ub.c_str(), H5F_ACC_TRUNC, fcpl, H5P_DEFAULT);
    REQUIRE(f >= 0);
    H5Fclose(f);
    H5Pclose(fcpl);
  }
  CHECK(cf::io::has_hdf5_signature(ub));
  CHECK(cf::io::is_hdf5_file(ub));
  {
    std::ofstream out(text);
    out << "not hdf5 at all, though named .h5\n";
  }
  CHECK_FALSE(cf::io::has_hdf5_signature(text));
  CHECK_FALSE(cf::io::has_hdf5_signature(tmp_path("missing")));
  CHECK_FALSE(cf::io::has_hdf5_signature("/tmp"));
  std::remove(plain.c_str());
  std::remove(ub.c_str());
  std::remove(text.c_str());
}

TEST_CASE("hdf5 writer hitting a full disk fails cleanly: no crash at exit, old file kept, no temporary",
          "[io][diskfull]") {
  // A failed H5Fclose (metadata flush refused) used to leave libhdf5 a half-closed file that its
  // atexit clean-up dereferenced: SIGSEGV after "disk full" in train and capture. The file-size
  // limit (RLIMIT_FSIZE, SIGXFSZ ignored: writes fail with EFBIG) stands in for a full disk; the
  // limits sweep the point of failure over the raw-data write and the metadata flush at close.
  const std::string dir = tmp_path("diskfull");
  REQUIRE(std::system(("rm -rf " + dir + " && mkdir -p " + dir).c_str()) == 0);
  const std::string target = dir + "/ckpt.h5";
  cf::write_file_atomic(target, "old contents\n");
  const std::size_t n = 20000;  // 80 kB of raw data plus metadata
  int clean = 0, close_failures = 0, successes = 0;
  for (long limit = 4096; limit <= 100000; limit += 1536) {
    const std::string log = dir + "/child.log";
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      std::signal(SIGXFSZ, SIG_IGN);
      struct rlimit rl {
        static_cast<rlim_t>(limit), static_cast<rlim_t>(limit)
      };
      setrlimit(RLIMIT_FSIZE, &rl);
      int code = 0;
      try {
        cf::io::write_hdf5_atomic(target, [&](File& f) {
          f.set_attr("format", "causalflow-checkpoint");
          auto g = f.create_group("params");
          g.write("w", std::vector<float>(n, 1.f), Shape{n});
          for (int i = 0; i < 50; ++i) g.set_attr("a" + std::to_string(i), std::string(200, 'x'));
        });
      } catch (const cf::Error& e) {
        std::FILE* out = std::fopen(log.c_str(), "w");
        if (out) {
          std::fputs(e.what(), out);
          std::fclose(out);
        }
        code = 1;
      }
      std::exit(code);  // exit handlers run: libhdf5's clean-up used to crash here
    }
    int status = 0;
    waitpid(pid, &status, 0);
    INFO("file-size limit " << limit << " bytes");
    REQUIRE(WIFEXITED(status));  // no signal
    ++clean;
    if (WEXITSTATUS(status) == 0) {
      ++successes;
      cf::write_file_atomic(target, "old contents\n");
      continue;
    }
    REQUIRE(WEXITSTATUS(status) == 1);
    std::ifstream in(log);
    const std::string msg((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (msg.find("closing HDF5 file") != std::string::npos) ++close_failures;
    std::ifstream old(target);
    const std::string kept((std::istreambuf_iterator<char>(old)), std::istreambuf_iterator<char>());
    CHECK(kept == "old contents\n");
    CHECK(std::system(("ls " + dir + " | grep -q tmp").c_str()) != 0);  // no temporary left
  }
  CHECK(clean >= 60);
  CHECK(close_failures >= 1);  // the sweep reached the failing-close path
  CHECK(successes >= 1);       // and the limit where everything fits
  std::system(("rm -rf " + dir).c_str());
}
