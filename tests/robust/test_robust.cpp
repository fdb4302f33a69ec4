// Robustness tests (issue 9): the NaN stop never persists non-finite parameters and says what
// is on disk; exceptions never leave OpenMP regions; the project's HDF5 files hold no
// variable-length strings.
#include <hdf5.h>
#include <omp.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "cf/core/error.hpp"
#include "cf/core/omp_exception.hpp"
#include "cf/io/hdf5.hpp"
#include "cf/nn/capture.hpp"
#include "cf/nn/checkpoint.hpp"
#include "cf/nn/config.hpp"
#include "cf/nn/model.hpp"
#include "cf/nn/trainer.hpp"

namespace fs = std::filesystem;
using namespace cf::nn;

namespace {

std::string tmp_dir(const std::string& name) {
  const std::string d = "/tmp/cf_test_robust_" + std::to_string(::getpid()) + "_" + name;
  fs::remove_all(d);
  return d;
}

ModelConfig tiny_config() {
  ModelConfig c;
  c.vocab_size = 13;
  c.block_size = 16;
  c.n_layer = 1;
  c.n_head = 2;
  c.d_model = 16;
  c.layers = parse_schedule("full", 1, LayerConfig{});
  return c;
}

TrainData tiny_data() {
  TrainData d;
  d.vocab_size = 13;
  for (int i = 0; i < 600; ++i) d.train.push_back((i * 7 + i / 13) % 13);
  for (int i = 0; i < 200; ++i) d.val.push_back((i * 5 + 3) % 13);
  return d;
}

TrainConfig tiny_train(const std::string& dir) {
  TrainConfig t;
  t.out_dir = dir;
  t.max_steps = 4;
  t.batch = 2;
  t.seq_len = 8;
  t.lr = 1e-3;
  t.min_lr = 0;
  t.warmup = 0;
  t.eval_interval = 1;
  t.eval_batches = 1;
  t.ckpt_interval = 1;
  return t;
}

bool all_finite(const std::vector<float>& v) {
  for (float x : v)
    if (!std::isfinite(x)) return false;
  return true;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const cf::Error& e) {
    return e.what();
  }
  return "<no cf::Error thrown>";
}

}  // namespace

TEST_CASE("NaN stop: an overflowing update (lr 1e39) writes no checkpoint and says so", "[robust][nan]") {
  const std::string dir = tmp_dir("nan_lr");
  TrainConfig t = tiny_train(dir);
  t.lr = 1e39;  // the command: train --lr 1e39 --min-lr 0 --warmup 0 --ckpt-interval 1
  const std::string msg = error_of([&] { train(tiny_config(), t, tiny_data(), "", nullptr, nullptr); });
  CHECK_THAT(msg, Catch::Contains("non-finite parameters after the update of step 1"));
  CHECK_THAT(msg, Catch::Contains("this run wrote no checkpoint"));
  CHECK_FALSE(fs::exists(dir + "/last.h5"));
  CHECK_FALSE(fs::exists(dir + "/best.h5"));
  fs::remove_all(dir);
}

TEST_CASE("NaN stop: resumed run with a bad update leaves the previous checkpoint finite", "[robust][nan]") {
  const std::string dir = tmp_dir("nan_resume");
  TrainConfig good = tiny_train(dir);
  good.max_steps = 3;
  train(tiny_config(), good, tiny_data(), "", nullptr, nullptr);
  REQUIRE(fs::exists(dir + "/last.h5"));
  for (const char* what : {"lr", "weight_decay"}) {
    TrainConfig bad = tiny_train(dir);
    bad.max_steps = 6;
    if (std::string(what) == "lr")
      bad.lr = 1e39;
    else
      bad.adamw.weight_decay = std::nan("");  // train --weight-decay nan
    const std::string msg =
        error_of([&] { train(tiny_config(), bad, tiny_data(), dir + "/last.h5", nullptr, nullptr); });
    INFO(what << ": " << msg);
    CHECK_THAT(msg, Catch::Contains("non-finite parameters after the update of step 4"));
    CHECK_THAT(msg, Catch::Contains("this run wrote no checkpoint") && Catch::Contains("untouched"));
    const Checkpoint ck = load_checkpoint(dir + "/last.h5", true);
    CHECK(ck.step == 3);
    CHECK(all_finite(ck.model.params));
    CHECK(all_finite(ck.optim.m));
    CHECK(all_finite(ck.optim.v));
  }
  fs::remove_all(dir);
}

TEST_CASE("NaN stop: a run that saved finite steps names the step its last.h5 holds", "[robust][nan]") {
  // Weight decay is applied as params -= lr * wd * params: with lr * wd = 2 the parameters flip
  // sign and grow (|1 - 2| = 1, then Adam's term pushes them on) but stay finite for a while; a
  // huge decay makes them overflow after the first checkpointed steps.
  const std::string dir = tmp_dir("nan_later");
  TrainConfig t = tiny_train(dir);
  t.max_steps = 40;
  t.lr = 1.0;
  t.adamw.weight_decay = 1e12;  // |1 - 1e12| per step: float overflow after 3-4 updates
  const std::string msg = error_of([&] { train(tiny_config(), t, tiny_data(), "", nullptr, nullptr); });
  INFO(msg);
  CHECK_THAT(msg, Catch::Contains("non-finite"));
  if (fs::exists(dir + "/last.h5")) {
    const Checkpoint ck = load_checkpoint(dir + "/last.h5", true);
    CHECK(all_finite(ck.model.params));
    CHECK_THAT(msg, Catch::Contains("holds the finite parameters of step " + std::to_string(ck.step)));
  } else {
    CHECK_THAT(msg, Catch::Contains("this run wrote no checkpoint"));
  }
  if (fs::exists(dir + "/best.h5")) CHECK(all_finite(load_checkpoint(dir + "/best.h5", false).model.params));
  fs::remove_all(dir);
}

TEST_CASE("OmpExceptions: the first exception of a parallel loop is rethrown after the region", "[robust][omp]") {
  const int threads = std::max(2, omp_get_max_threads());
  std::atomic<int> ran{0};
  cf::OmpExceptions errors;
  auto region = [&] {
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (int i = 0; i < 1000; ++i)
      errors.run([&] {
        ++ran;
        if (i == 17) throw cf::InvalidArgument("iteration 17 failed");
        if (i == 400) throw std::runtime_error("iteration 400 failed");
      });
    errors.rethrow();
  };
  try {
    region();
    FAIL("no exception rethrown");
  } catch (const cf::InvalidArgument& e) {
    CHECK(std::string(e.what()) == "iteration 17 failed");
  } catch (const std::runtime_error& e) {
    // iteration 400 may run first on another thread: either is "the first"
    CHECK(std::string(e.what()) == "iteration 400 failed");
  }
  CHECK(ran.load() >= 1);
  CHECK(ran.load() <= 1000);
  // the collector is reusable and silent when nothing throws
  ran = 0;
#pragma omp parallel for num_threads(threads)
  for (int i = 0; i < 100; ++i) errors.run([&] { ++ran; });
  CHECK_NOTHROW(errors.rethrow());
  CHECK(ran.load() == 100);
  // a plain parallel block (one body per thread)
  cf::OmpExceptions block;
#pragma omp parallel num_threads(threads)
  block.run([&] {
    if (omp_get_thread_num() == 1) throw std::bad_alloc();
  });
  CHECK_THROWS_AS(block.rethrow(), std::bad_alloc);
}

TEST_CASE("OmpExceptions: a throwing attention hook inside the model's parallel loop reaches the caller",
          "[robust][omp]") {
  // on_scores hooks run inside forward_backward's per-head OpenMP loop (serial when a hook is set,
  // but still an OpenMP region): an exception there must arrive here, not terminate the process.
  const Model<float> m = init_model<float>(tiny_config(), 3);
  std::vector<std::int32_t> x(8, 1), y(8, 2);
  ForwardHooks hooks;
  hooks.on_scores = [](int, int h, Eigen::Ref<Eigen::MatrixXf>) {
    if (h == 1) throw cf::InvalidArgument("hook refused head 1");
  };
  Workspace<float> ws;
  CHECK_THROWS_WITH(forward_backward<float>(m, x.data(), y.data(), 1, 8, nullptr, ws, &hooks),
                    Catch::Contains("hook refused head 1"));
}

namespace {
// Collects every variable-length string type among the attributes and datasets of a file.
struct VlenScan {
  std::vector<std::string> found;
  int attributes = 0, datasets = 0;
};

herr_t scan_attr(hid_t loc, const char* name, const H5A_info_t*, void* op) {
  auto* s = static_cast<VlenScan*>(op);
  const hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
  const hid_t t = H5Aget_type(a);
  ++s->attributes;
  if (H5Tget_class(t) == H5T_VLEN || (H5Tget_class(t) == H5T_STRING && H5Tis_variable_str(t) > 0))
    s->found.push_back(std::string("attribute ") + name);
  H5Tclose(t);
  H5Aclose(a);
  return 0;
}

herr_t scan_object(hid_t root, const char* name, const H5O_info_t* info, void* op) {
  auto* s = static_cast<VlenScan*>(op);
  const hid_t o = H5Oopen(root, name, H5P_DEFAULT);
  H5Aiterate2(o, H5_INDEX_NAME, H5_ITER_INC, nullptr, scan_attr, op);
  if (info->type == H5O_TYPE_DATASET) {
    ++s->datasets;
    const hid_t t = H5Dget_type(o);
    if (H5Tget_class(t) == H5T_VLEN || (H5Tget_class(t) == H5T_STRING && H5Tis_variable_str(t) > 0))
      s->found.push_back(std::string("dataset ") + name);
    H5Tclose(t);
  }
  H5Oclose(o);
  return 0;
}

VlenScan scan_file(const std::string& path) {
  VlenScan s;
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  REQUIRE(f >= 0);
  H5Ovisit(f, H5_INDEX_NAME, H5_ITER_INC, scan_object, &s);
  H5Fclose(f);
  return s;
}
}  // namespace

TEST_CASE("checkpoints and captures hold fixed-length strings only (no global-heap strings)", "[robust][hdf5]") {
  const std::string dir = tmp_dir("fixed_strings");
  fs::create_directories(dir);
  TrainConfig t = tiny_train(dir);
  t.max_steps = 1;
  train(tiny_config(), t, tiny_data(), "", nullptr, nullptr);
  const Model<float> m = load_checkpoint(dir + "/last.h5", false).model;
  std::vector<std::int32_t> toks(40);
  for (int i = 0; i < 40; ++i) toks[i] = i % 13;
  CaptureOptions co;
  co.source = "a source text\nwith several lines";
  capture_model(m, capture_windows(toks, 8, 2), dir + "/capture.h5", co);
  for (const std::string f : {dir + "/last.h5", dir + "/best.h5", dir + "/capture.h5"}) {
    const VlenScan s = scan_file(f);
    INFO(f << ": " << s.attributes << " attributes, " << s.datasets << " datasets");
    CHECK(s.attributes >= 3);
    CHECK(s.datasets >= 3);
    for (const auto& x : s.found) FAIL_CHECK("variable-length type: " << x);
  }
  fs::remove_all(dir);
}
