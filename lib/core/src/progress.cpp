#include "cf/core/progress.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace cf {
namespace {
std::atomic<bool> g_enabled{true};
}

void set_progress_enabled(bool on) { g_enabled.store(on); }

bool progress_visible() {
  if (!g_enabled.load()) return false;
  if (const char* f = std::getenv("CF_PROGRESS"); f && std::strcmp(f, "1") == 0) return true;
  return ::isatty(STDERR_FILENO) == 1;
}

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const long t = std::lround(s);
  char buf[48];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm%02lds", t / 3600, (t / 60) % 60, t % 60);
  else if (t >= 60)
    std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
  else
    std::snprintf(buf, sizeof buf, "%lds", t);
  return buf;
}

Progress::Progress(std::string what, std::int64_t total)
    : what_(std::move(what)), total_(total), start_(std::chrono::steady_clock::now()), visible_(progress_visible()) {}

Progress::~Progress() {
  if (drawn_) std::fprintf(stderr, "\r%*s\r", 79, "");  // clear the line
}

void Progress::advance(std::int64_t k) {
  done_.fetch_add(k);
  maybe_draw();
}

void Progress::set(std::int64_t done) {
  done_.store(done);
  maybe_draw();
}

std::string Progress::line() const {
  const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const std::int64_t d = done_.load();
  char buf[256];
  if (total_ > 0) {
    const double frac = std::min(1.0, double(d) / double(total_));
    const double eta = frac > 0 ? el * (1 - frac) / frac : NAN;
    std::snprintf(buf, sizeof buf, "%s: %lld/%lld (%.0f%%), %s elapsed, ETA %s", what_.c_str(), (long long)d,
                  (long long)total_, 100 * frac, format_duration(el).c_str(), format_duration(eta).c_str());
  } else {
    std::snprintf(buf, sizeof buf, "%s: %lld done, %s elapsed", what_.c_str(), (long long)d,
                  format_duration(el).c_str());
  }
  return buf;
}

void Progress::maybe_draw() {
  if (!visible_) return;
  const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (el < kProgressDelay) return;
  std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
  if (!lock.owns_lock() || el - last_draw_ < 0.5) return;
  last_draw_ = el;
  std::string l = line();
  if (l.size() > 78) l.resize(78);
  std::fprintf(stderr, "\r%-78s", l.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

}  // namespace cf
