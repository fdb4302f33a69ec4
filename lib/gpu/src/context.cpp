#include "cf/gpu/context.hpp"

#include <cstdlib>
#include <string>

#include "cf/core/error.hpp"

namespace cf::gpu {

ContextOptions ContextOptions::from_environment() {
  ContextOptions o;
  if (const char* e = std::getenv("CF_GPU_ATTENTION")) {
    const std::string v = e;
    const auto path = kAttentionPaths.find(v);
    require(path.has_value(), "CF_GPU_ATTENTION must be one of ", kAttentionPaths.list(), ", got '", v, "'");
    o.attention = *path;
  }
  if (const char* e = std::getenv("CF_GPU_EMULATE"); e && *e) {
    const std::string v = e;
    require(v == "0" || v == "1", "CF_GPU_EMULATE = '", v, "': use 1 (run --device cuda on the emulated twin) or 0");
    o.emulate = v == "1";
  }
  return o;
}

namespace {
// The one default context of the process: made once, under the mutex, never replaced and never
// destroyed (its CUDA handles would otherwise be released from a static destructor, after the
// CUDA runtime may have shut down).
std::mutex g_default_mutex;
Context* g_default = nullptr;
}  // namespace

Context& default_context() {
  const std::lock_guard<std::mutex> lock(g_default_mutex);
  if (!g_default) g_default = new Context(ContextOptions::from_environment());
  return *g_default;
}

void init_default_context(const ContextOptions& o) {
  const std::lock_guard<std::mutex> lock(g_default_mutex);
  if (g_default)
    throw Error("init_default_context: the default device context exists already (make it once, at start-up)");
  g_default = new Context(o);
}

}  // namespace cf::gpu
