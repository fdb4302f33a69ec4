#include "cf/nn/context.hpp"

#include <atomic>
#include <deque>
#include <mutex>

namespace cf::nn {

Context Context::from_environment() {
  Context c;
  c.gemm = gemm_backend_from_environment(c.gemm_why);
  return c;
}

namespace {
// Every context ever made stays in `made` (a few objects per process), so a reference from
// context() never dangles; `current` points at the newest. Reads are one atomic load: the model's
// inner loops ask for it per tile.
std::mutex g_mutex;
std::deque<Context> g_made;
std::atomic<const Context*> g_current{nullptr};
}  // namespace

const Context& context() {
  if (const Context* c = g_current.load(std::memory_order_acquire)) return *c;
  const std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_current.load(std::memory_order_relaxed)) {
    g_made.push_back(Context::from_environment());
    g_current.store(&g_made.back(), std::memory_order_release);
  }
  return *g_current.load(std::memory_order_relaxed);
}

void set_context(const Context& c) {
  const std::lock_guard<std::mutex> lock(g_mutex);
  g_made.push_back(c);
  g_current.store(&g_made.back(), std::memory_order_release);
}

}  // namespace cf::nn
