// libFuzzer target for the safetensors header parser (issue 13): any input must either parse into a
// header whose every tensor can be read (converted to float where the dtype allows) inside the
// buffer, or be rejected with cf::InvalidArgument. ASan/UBSan report any out-of-bounds access,
// overflow or leak. Modes: docs/hf.md ("Fuzzing").
#include <cstddef>
#include <cstdint>
#include <vector>

#include "cf/core/error.hpp"
#include "cf/hf/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const cf::hf::Header h = cf::hf::parse_header(data, size, "fuzz");
    std::vector<float> buf;
    for (const auto& t : h.tensors) {
      // the parser guarantees data_start + end <= size; touch the first and last byte of each range
      if (t.end > t.begin) {
        volatile std::uint8_t first = data[h.data_start + t.begin], last = data[h.data_start + t.end - 1];
        (void)first;
        (void)last;
      }
      const auto d = t.dtype;
      if (d != cf::hf::Dtype::F32 && d != cf::hf::Dtype::F16 && d != cf::hf::Dtype::BF16 && d != cf::hf::Dtype::F64)
        continue;
      const std::size_t n = static_cast<std::size_t>(t.numel());
      if (n > (1u << 20)) continue;  // bounded by the input size anyway; keep each run fast
      buf.resize(n);
      cf::hf::convert_to_float(d, data + h.data_start + t.begin, n, buf.data());
    }
  } catch (const cf::InvalidArgument&) {
    // rejected with a message: the expected outcome for malformed input
  }
  return 0;
}
