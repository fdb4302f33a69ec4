#pragma once
// Progress with an ETA on stderr for long work (docs/conventions.md "Progress"): shown only when
// stderr is a terminal, progress is enabled (tools switch it off with --quiet) and the work has
// run for more than kProgressDelay seconds; one line redrawn in place at most every 0.5 s, cleared
// when the work ends. Thread-safe: OpenMP loops may call advance() from any thread.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace cf {

inline constexpr double kProgressDelay = 2.0;

/// Globally enable or disable progress lines (cf::app::run sets it from --quiet; default on).
void set_progress_enabled(bool on);
/// Whether a new Progress may draw: enabled and stderr is a terminal (or CF_PROGRESS=1 forces it,
/// for tests).
bool progress_visible();

/// One unit of long work with `total` steps (total <= 0: unknown, no ETA).
class Progress {
 public:
  Progress(std::string what, std::int64_t total);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  /// `k` more steps done.
  void advance(std::int64_t k = 1);
  /// Steps done so far set to `done`.
  void set(std::int64_t done);
  /// The line that would be drawn now (for tests): "what: 12/30 (40%), 3s elapsed, ETA 5s".
  std::string line() const;

 private:
  void maybe_draw();
  std::string what_;
  std::int64_t total_;
  std::atomic<std::int64_t> done_{0};
  std::chrono::steady_clock::time_point start_;
  double last_draw_ = -1;
  bool drawn_ = false, visible_;
  std::mutex mu_;
};

/// "1h02m03s" / "2m03s" / "5s"; "?" for a non-finite value.
std::string format_duration(double seconds);

}  // namespace cf
