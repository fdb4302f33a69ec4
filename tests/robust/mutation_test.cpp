// Mutation test over the project's file formats (docs/testing.md "Mutation test"): a small
// checkpoint, a capture and a token set are written, then mutated (bit flips, truncation, byte
// overwrites in the header / metadata / data, zeroed regions) with a seeded generator. Each
// mutated file is opened by the real readers in a forked child (load_checkpoint, the spectral
// weight reader, the capture readers of rollout, read_token_files) and, for every K-th case, by
// the real tools (spectral, capture, rollout, train). A case passes when the file is accepted or
// refused with cf::InvalidArgument carrying a message (tools: exit 0 or 2 with a message on
// stderr). A signal is a crash, a child still running after the timeout is a hang; both fail.
//
//   mutation_test --work DIR --tools BINDIR --text FILE [--cases N] [--seed S] [--timeout-ms T]
//                 [--tool-every K]
// CF_MUTATION_CASES=N (environment) overrides --cases: the long mode, e.g. 5000.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cf/core/error.hpp"
#include "cf/data/token_file.hpp"
#include "cf/io/hdf5.hpp"
#include "cf/nn/capture.hpp"
#include "cf/nn/checkpoint.hpp"
#include "cf/nn/config.hpp"
#include "cf/nn/model.hpp"
#include "cf/rollout/kernel.hpp"
#include "cf/rollout/preset.hpp"
#include "cf/spectral/checkpoint.hpp"

namespace fs = std::filesystem;

namespace {

struct Options {
  std::string work, tools, text;
  long cases = 300;
  unsigned seed = 20261123;
  int timeout_ms = 20000;
  long tool_every = 10;
};

std::vector<char> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& path, const std::vector<char>& b) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(b.data(), static_cast<std::streamsize>(b.size()));
  if (!out) throw cf::Error("mutation_test: cannot write " + path);
}

// ---- seed files -------------------------------------------------------------------------------
cf::nn::ModelConfig small_config() {
  cf::nn::ModelConfig c;
  c.vocab_size = 256;  // byte model, so the tools can tokenise a text file
  c.block_size = 16;
  c.n_layer = 2;
  c.n_head = 2;
  c.d_model = 16;
  cf::nn::LayerConfig p;
  p.b = 4;
  p.w = 4;
  p.e = 2;
  c.layers = cf::nn::parse_schedule("full,sd", 2, p);
  return c;
}

struct Seeds {
  std::string checkpoint, capture, tokens;  // tokens: prefix
};

Seeds write_seeds(const std::string& dir) {
  Seeds s{dir + "/seed_ckpt.h5", dir + "/seed_capture.h5", dir + "/seed_tokens"};
  cf::nn::Checkpoint ck;
  ck.model = cf::nn::init_model<float>(small_config(), 7);
  ck.optim.m.assign(ck.model.params.size(), 0.01f);
  ck.optim.v.assign(ck.model.params.size(), 0.001f);
  ck.optim.t = 3;
  ck.step = 3;
  ck.best_val_loss = 4.5;
  ck.has_best_val = true;
  ck.train_config = {{"lr", 0.001}, {"steps", 3}};
  cf::nn::save_checkpoint(s.checkpoint, ck);

  std::vector<std::int32_t> toks;
  for (int i = 0; i < 200; ++i) toks.push_back((i * 37 + 11) % 256);
  cf::nn::CaptureOptions co;
  co.source = "mutation seed";
  cf::nn::capture_model(ck.model, cf::nn::capture_windows(toks, 8, 2), s.capture, co);

  // token set written by hand in the documented format (docs/data.md), independent of the writer
  std::vector<char> train, val;
  for (int i = 0; i < 300; ++i) {
    const std::uint16_t t = static_cast<std::uint16_t>((i * 13 + 5) % 256);
    auto& dst = i < 260 ? train : val;
    dst.push_back(static_cast<char>(t & 0xff));
    dst.push_back(static_cast<char>(t >> 8));
  }
  write_bytes(s.tokens + ".train.bin", train);
  write_bytes(s.tokens + ".val.bin", val);
  const std::string meta =
      R"({"vocab_size": 256, "tokenizer": "byte", "n_train": 260, "n_val": 40, "source": "mutation seed"})";
  write_bytes(s.tokens + ".meta.json", std::vector<char>(meta.begin(), meta.end()));
  return s;
}

// ---- mutations ----------------------------------------------------------------------------------
// Returns a description; mutates `b` in place (b is never empty on entry).
std::string mutate(std::vector<char>& b, std::mt19937_64& rng) {
  auto uni = [&](std::size_t lo, std::size_t hi) {  // [lo, hi]
    return std::uniform_int_distribution<std::size_t>(lo, hi)(rng);
  };
  const std::size_t n = b.size();
  // regions: header (first 1 KiB: superblock, root object header), anywhere (metadata, heaps,
  // B-trees, data), tail (last quarter: mostly raw data and late metadata)
  auto pick_offset = [&]() -> std::size_t {
    switch (uni(0, 2)) {
      case 0:
        return uni(0, std::min<std::size_t>(n, 1024) - 1);
      case 1:
        return uni(0, n - 1);
      default:
        return uni(n - std::max<std::size_t>(1, n / 4), n - 1);
    }
  };
  std::ostringstream d;
  switch (uni(0, 5)) {
    case 0: {  // bit flips
      const std::size_t k = uni(1, 8);
      d << "flip " << k << " bits at";
      for (std::size_t i = 0; i < k; ++i) {
        const std::size_t off = pick_offset();
        const int bit = static_cast<int>(uni(0, 7));
        b[off] = static_cast<char>(b[off] ^ (1 << bit));
        d << " " << off << ":" << bit;
      }
      break;
    }
    case 1: {  // truncation
      const std::size_t len = uni(0, n - 1);
      b.resize(len);
      d << "truncate to " << len << " of " << n << " bytes";
      break;
    }
    case 2: {  // random bytes
      const std::size_t off = pick_offset(), len = std::min(n - off, uni(1, 16));
      for (std::size_t i = 0; i < len; ++i) b[off + i] = static_cast<char>(uni(0, 255));
      d << "overwrite " << len << " random bytes at " << off;
      break;
    }
    case 3: {  // zeroed region
      const std::size_t off = pick_offset(), len = std::min(n - off, uni(1, 256));
      std::fill(b.begin() + static_cast<long>(off), b.begin() + static_cast<long>(off + len), '\0');
      d << "zero " << len << " bytes at " << off;
      break;
    }
    case 4: {  // 0xff region (all-ones lengths, addresses, sizes)
      const std::size_t off = pick_offset(), len = std::min(n - off, uni(1, 8));
      std::fill(b.begin() + static_cast<long>(off), b.begin() + static_cast<long>(off + len), '\xff');
      d << "0xff " << len << " bytes at " << off;
      break;
    }
    default: {  // small integer poke (plausible but wrong sizes/counts/ranks)
      const std::size_t off = pick_offset();
      b[off] = static_cast<char>(uni(0, 1) ? uni(0, 8) : b[off] + static_cast<char>(uni(1, 3)));
      d << "poke byte at " << off;
      break;
    }
  }
  return d.str();
}

// ---- readers (run in the child) -----------------------------------------------------------------
enum class Kind { Checkpoint, Capture, Tokens };
const char* kind_name(Kind k) {
  return k == Kind::Checkpoint ? "checkpoint" : k == Kind::Capture ? "capture" : "tokens";
}

void read_with_library(Kind kind, const std::string& path) {
  switch (kind) {
    case Kind::Checkpoint: {
      (void)cf::nn::load_checkpoint(path, true);
      (void)cf::spectral::read_attention_weights(path);
      break;
    }
    case Kind::Capture: {
      cf::rollout::require_capture_file(path);
      (void)cf::rollout::read_capture_kernels(path);
      (void)cf::rollout::read_capture_alpha(path, "/alpha_token_mean");
      (void)cf::rollout::read_capture_alpha(path, "/alpha_frobenius");
      break;
    }
    case Kind::Tokens:
      (void)cf::data::read_token_files(path);
      break;
  }
}

// Exit codes of the child: 0 accepted, 2 InvalidArgument with a message, 3 another cf::Error,
// 4 another exception, 5 InvalidArgument without a message.
[[noreturn]] void child_library(Kind kind, const std::string& path) {
  int code = 0;
  try {
    read_with_library(kind, path);
  } catch (const cf::InvalidArgument& e) {
    code = std::strlen(e.what()) > 0 ? 2 : 5;
  } catch (const cf::Error& e) {
    std::fprintf(stderr, "  cf::Error (not InvalidArgument): %s\n", e.what());
    code = 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "  exception (not InvalidArgument): %s\n", e.what());
    code = 4;
  }
  std::exit(code);  // normal exit: HDF5 closes at exit too, a crash there counts
}

struct Outcome {
  bool crashed = false, hung = false;
  int code = 0, signal = 0;
  double seconds = 0;
};

// Runs `child` in a forked process (stdout/stderr to `log`), killed after timeout_ms.
template <class F>
Outcome run_forked(F&& child, const std::string& log, int timeout_ms) {
  const auto t0 = std::chrono::steady_clock::now();
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) throw cf::Error("mutation_test: fork failed");
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      ::close(fd);
    }
    alarm(static_cast<unsigned>(timeout_ms / 1000 + 5));  // backstop if the parent dies
    child();
    _exit(99);
  }
  Outcome o;
  int status = 0;
  for (;;) {
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (el * 1000 > timeout_ms) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      o.hung = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!o.hung) {
    if (WIFSIGNALED(status)) {
      o.crashed = true;
      o.signal = WTERMSIG(status);
    } else {
      o.code = WEXITSTATUS(status);
    }
  }
  return o;
}

std::string file_text(const std::string& path) {
  const auto b = read_bytes(path);
  return std::string(b.begin(), b.end());
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "mutation_test: " << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--work")
      o.work = val();
    else if (a == "--tools")
      o.tools = val();
    else if (a == "--text")
      o.text = val();
    else if (a == "--cases")
      o.cases = std::stol(val());
    else if (a == "--seed")
      o.seed = static_cast<unsigned>(std::stoul(val()));
    else if (a == "--timeout-ms")
      o.timeout_ms = std::stoi(val());
    else if (a == "--tool-every")
      o.tool_every = std::stol(val());
    else if (a == "--help" || a == "-h") {
      std::cout << "usage: mutation_test --work DIR --tools BINDIR --text FILE [--cases N] [--seed S] "
                   "[--timeout-ms T] [--tool-every K]\n(CF_MUTATION_CASES=N overrides --cases)\n";
      return 0;
    } else {
      std::cerr << "mutation_test: unknown option " << a << "\n";
      return 2;
    }
  }
  if (const char* env = std::getenv("CF_MUTATION_CASES")) o.cases = std::stol(env);
  if (o.work.empty() || o.cases < 1 || o.timeout_ms < 100 || o.tool_every < 0) {
    std::cerr << "mutation_test: --work is required, --cases >= 1, --timeout-ms >= 100, --tool-every >= 0\n";
    return 2;
  }
  fs::remove_all(o.work);
  fs::create_directories(o.work);
  // The seeds are written in a child, so this process never starts OpenMP threads or libhdf5
  // before it forks the readers.
  const Seeds seeds{o.work + "/seed_ckpt.h5", o.work + "/seed_capture.h5", o.work + "/seed_tokens"};
  {
    const Outcome w = run_forked(
        [&] {
          try {
            write_seeds(o.work);
          } catch (const std::exception& e) {
            std::fprintf(stderr, "cannot write the seed files: %s\n", e.what());
            std::exit(1);
          }
          std::exit(0);
        },
        o.work + "/seed_write.log", 120000);
    if (w.crashed || w.hung || w.code != 0) {
      std::cerr << "FAIL: writing the seed files failed\n" << file_text(o.work + "/seed_write.log");
      return 1;
    }
  }
  const std::vector<char> ckpt = read_bytes(seeds.checkpoint), cap = read_bytes(seeds.capture);
  const std::vector<std::string> token_suffix = {".train.bin", ".val.bin", ".meta.json"};
  std::vector<std::vector<char>> tok;
  for (const auto& sfx : token_suffix) tok.push_back(read_bytes(seeds.tokens + sfx));

  // The unmutated seeds must be accepted by every reader (else the test would prove nothing).
  for (Kind k : {Kind::Checkpoint, Kind::Capture, Kind::Tokens}) {
    const std::string p = k == Kind::Checkpoint ? seeds.checkpoint : k == Kind::Capture ? seeds.capture : seeds.tokens;
    const Outcome out = run_forked([&] { child_library(k, p); }, o.work + "/seed.log", o.timeout_ms);
    if (out.crashed || out.hung || out.code != 0) {
      std::cerr << "FAIL: the unmutated " << kind_name(k) << " is not accepted (code " << out.code << ")\n"
                << file_text(o.work + "/seed.log");
      return 1;
    }
  }

  std::mt19937_64 rng(o.seed);
  long crashes = 0, hangs = 0, wrong = 0, refused = 0, accepted = 0, tool_runs = 0;
  double slowest = 0;
  const std::string failures = o.work + "/failures";
  fs::create_directories(failures);
  for (long c = 0; c < o.cases; ++c) {
    const Kind kind = static_cast<Kind>(c % 3);
    std::string path, desc;
    std::vector<char> b;
    if (kind == Kind::Checkpoint) {
      b = ckpt;
      path = o.work + "/case_ckpt.h5";
    } else if (kind == Kind::Capture) {
      b = cap;
      path = o.work + "/case_capture.h5";
    } else {
      path = o.work + "/case_tokens";
      const std::size_t which = static_cast<std::size_t>(rng() % 3);
      for (std::size_t i = 0; i < 3; ++i) write_bytes(path + token_suffix[i], tok[i]);
      b = tok[which];
      desc = token_suffix[which] + ": ";
      path += token_suffix[which];
    }
    desc += mutate(b, rng);
    write_bytes(path, b);
    const std::string reader_path = kind == Kind::Tokens ? o.work + "/case_tokens" : path;
    const std::string log = o.work + "/case.log";
    auto judge = [&](const Outcome& out, const std::string& who, bool tool) {
      slowest = std::max(slowest, out.seconds);
      std::string verdict;
      if (out.crashed) {
        ++crashes;
        verdict = "CRASH (signal " + std::to_string(out.signal) + ")";
      } else if (out.hung) {
        ++hangs;
        verdict = "HANG (killed after " + std::to_string(o.timeout_ms) + " ms)";
      } else if (out.code == 0) {
        ++accepted;
      } else if (out.code == 2 && (!tool || !file_text(log).empty())) {
        ++refused;
      } else {
        ++wrong;
        verdict = tool ? "exit " + std::to_string(out.code) + " (expected 0 or 2 with a message)"
                       : "child code " + std::to_string(out.code) + " (expected 0 or cf::InvalidArgument)";
      }
      if (!verdict.empty()) {
        const std::string keep = failures + "/case" + std::to_string(c) + "_" + fs::path(path).filename().string();
        fs::copy_file(path, keep, fs::copy_options::overwrite_existing);
        std::cout << "FAIL case " << c << " " << kind_name(kind) << " [" << desc << "] " << who << ": " << verdict
                  << " (file kept as " << keep << ")\n"
                  << file_text(log);
      }
    };
    judge(run_forked([&] { child_library(kind, reader_path); }, log, o.timeout_ms), "library readers", false);

    if (o.tool_every > 0 && !o.tools.empty() && c % o.tool_every == 0) {
      std::vector<std::vector<std::string>> cmds;
      const std::string out = o.work + "/tool_out";
      if (kind == Kind::Checkpoint) {
        cmds.push_back({o.tools + "/spectral", "--checkpoint", path, "--summary-only", "--no-eigenvalues"});
        if (!o.text.empty())
          cmds.push_back({o.tools + "/capture", "--checkpoint", path, "--text", o.text, "--seq-len", "8", "--n-seq",
                          "2", "--out", out + ".h5"});
      } else if (kind == Kind::Capture) {
        cmds.push_back({o.tools + "/rollout", "--model", path, "--alpha", "measured"});
      } else {
        cmds.push_back({o.tools + "/train",
                        "--data",
                        reader_path,
                        "--n-layer",
                        "1",
                        "--d-model",
                        "8",
                        "--n-head",
                        "1",
                        "--seq-len",
                        "8",
                        "--block-size",
                        "8",
                        "--batch",
                        "1",
                        "--steps",
                        "1",
                        "--threads",
                        "1",
                        "--quiet",
                        "--out-dir",
                        out + "_train"});
      }
      for (const auto& cmd : cmds) {
        ++tool_runs;
        const Outcome r = run_forked(
            [&] {
              std::vector<char*> av;
              for (const auto& s : cmd) av.push_back(const_cast<char*>(s.c_str()));
              av.push_back(nullptr);
              setenv("OMP_NUM_THREADS", "1", 1);
              execv(av[0], av.data());
              std::perror("execv");
              _exit(98);
            },
            log, o.timeout_ms);
        judge(r, fs::path(cmd[0]).filename().string(), true);
      }
    }
  }
  std::cout << "mutation test: " << o.cases << " mutated files (seed " << o.seed << "), " << tool_runs
            << " tool runs: " << accepted << " accepted, " << refused << " refused with exit 2, " << wrong
            << " wrong error class, " << crashes << " crashes, " << hangs << " hangs; slowest case " << slowest
            << " s\n";
  return crashes == 0 && hangs == 0 && wrong == 0 ? 0 : 1;
}
