#include "cf/gpu/device.hpp"

#include "cf/core/error.hpp"

#if CF_GPU_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace cf::gpu {

Device parse_device(const std::string& name) {
  if (const auto d = kDevices.find(name)) return *d;
  throw InvalidArgument(str("--device: unknown device '", name, "' (use ", kDevices.list(" or "), ")"));
}

DeviceStatus device_status() {
  DeviceStatus s;
#if CF_GPU_HAVE_CUDA
  s.compiled = true;
  int n = 0;  // cudaGetDeviceCount leaves it untouched when it fails (no driver)
  const cudaError_t e = cudaGetDeviceCount(&n);
  s.error = static_cast<int>(e);
  s.count = e == cudaSuccess ? n : 0;
  if (e != cudaSuccess)
    s.message =
        str("no usable CUDA device: cudaGetDeviceCount failed with error ", s.error, " (", cudaGetErrorString(e), ")");
  else if (n == 0)
    s.message = "no CUDA device on this machine";
  else
    s.message = str(n, " CUDA device(s)");
#else
  s.message = "this build has no CUDA path (configured with CF_ENABLE_CUDA=OFF or without nvcc)";
#endif
  return s;
}

void require_device(Device d, bool supported) {
  if (d == Device::Cpu) return;
  const DeviceStatus s = device_status();
  if (!s.compiled || s.count == 0) throw InvalidArgument(str("--device cuda: ", s.message, "; use --device cpu"));
  require(supported, "--device cuda: this tool's CUDA path is not implemented yet (docs/gpu.md lists what ",
          "runs on a device); use --device cpu");
}

}  // namespace cf::gpu
