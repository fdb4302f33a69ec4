#pragma once
// Exceptions and OpenMP: an exception that leaves the structured block of an OpenMP region (or
// one iteration of a worksharing loop) calls std::terminate (OpenMP 5.1 §2.1: "a throw executed
// inside a region must cause execution to resume within the same region, and the same thread
// that threw the exception must catch it"). Every parallel region of the project therefore runs
// its body through an OmpExceptions collector: the first exception thrown by any thread is
// stored, the remaining iterations are skipped cheaply, and the exception is rethrown on the
// calling thread after the region, where cf::app::run maps it to an exit code as usual.
//
//   cf::OmpExceptions errors;
//   #pragma omp parallel for
//   for (long i = 0; i < n; ++i)
//     errors.run([&] { body(i); });
//   errors.rethrow();
#include <atomic>
#include <exception>
#include <mutex>

namespace cf {

/// Collects the first exception thrown inside an OpenMP region (thread-safe) and rethrows it
/// after the region. Not copyable; one collector per region.
class OmpExceptions {
 public:
  OmpExceptions() = default;
  OmpExceptions(const OmpExceptions&) = delete;
  OmpExceptions& operator=(const OmpExceptions&) = delete;

  /// Run `f()` unless an exception was already captured; capture anything `f` throws.
  template <class F>
  void run(F&& f) noexcept {
    if (failed_.load(std::memory_order_relaxed)) return;
    try {
      f();
    } catch (...) {
      capture(std::current_exception());
    }
  }

  /// True once any exception has been captured (lets long loops stop early).
  bool failed() const noexcept { return failed_.load(std::memory_order_relaxed); }

  /// Store `e` if it is the first exception seen.
  void capture(std::exception_ptr e) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!first_) first_ = e;
    failed_.store(true, std::memory_order_relaxed);
  }

  /// Rethrow the first captured exception, if any (call after the region, on one thread).
  void rethrow() {
    if (first_) {
      std::exception_ptr e = first_;
      first_ = nullptr;
      failed_.store(false, std::memory_order_relaxed);
      std::rethrow_exception(e);
    }
  }

 private:
  std::atomic<bool> failed_{false};
  std::mutex mutex_;
  std::exception_ptr first_;
};

}  // namespace cf
