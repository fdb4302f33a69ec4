// safetensors reader/writer (cf/hf/safetensors.hpp): round trip, dtype conversion, and every class
// of malformed header rejected with cf::InvalidArgument (issue 13 acceptance 3).
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "cf/core/error.hpp"
#include "cf/hf/checkpoint.hpp"
#include "cf/hf/config.hpp"
#include "cf/hf/safetensors.hpp"

using namespace cf;
using namespace cf::hf;

namespace {

std::string le64(std::uint64_t n) {
  std::string s;
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return s;
}

// A file image from a header text and `data` bytes.
std::string image(const std::string& header, std::size_t data) {
  return le64(header.size()) + header + std::string(data, '\0');
}

Header parse(const std::string& img) {
  return parse_header(reinterpret_cast<const std::uint8_t*>(img.data()), img.size(), "test");
}

}  // namespace

TEST_CASE("safetensors: write then parse is the identity (shapes, offsets, metadata, bytes)", "[hf]") {
  std::vector<float> a(6), b(5);
  for (int i = 0; i < 6; ++i) a[i] = 0.5f * i - 1.f;
  for (int i = 0; i < 5; ++i) b[i] = std::ldexp(1.f, -i) + 3.f;
  const std::string img = safetensors_bytes({{"a.weight", {2, 3}, a.data()}, {"b", {5}, b.data()}}, {{"format", "pt"}});
  const std::uint64_t n =
      static_cast<std::uint8_t>(img[0]) | (static_cast<std::uint64_t>(static_cast<std::uint8_t>(img[1])) << 8);
  CHECK((8 + n) % 8 == 0);  // header padded: data 8-byte aligned
  const Header h = parse(img);
  REQUIRE(h.tensors.size() == 2);
  CHECK(h.metadata.at("format") == "pt");
  const TensorInfo* ta = h.find("a.weight");
  REQUIRE(ta);
  CHECK(ta->shape == std::vector<std::int64_t>{2, 3});
  CHECK(ta->dtype == Dtype::F32);
  std::vector<float> back(6);
  convert_to_float(ta->dtype, reinterpret_cast<const std::uint8_t*>(img.data()) + h.data_start + ta->begin, 6,
                   back.data());
  CHECK(std::memcmp(back.data(), a.data(), 24) == 0);
  CHECK(h.data_size == 44);
}

TEST_CASE("safetensors: F16 and BF16 bit patterns convert exactly", "[hf]") {
  CHECK(half_to_float(0x3c00) == 1.0f);
  CHECK(half_to_float(0xc000) == -2.0f);
  CHECK(half_to_float(0x7bff) == 65504.0f);
  CHECK(half_to_float(0x0001) == std::ldexp(1.0f, -24));     // smallest subnormal
  CHECK(half_to_float(0x03ff) == std::ldexp(1023.0f, -24));  // largest subnormal
  CHECK(std::isinf(half_to_float(0x7c00)));
  CHECK(std::isnan(half_to_float(0x7e00)));
  CHECK(std::signbit(half_to_float(0x8000)));
  CHECK(bf16_to_float(0x3f80) == 1.0f);
  CHECK(bf16_to_float(0x4049) == 3.140625f);
  // every finite half value round-trips through float -> half by the IEEE definition
  for (std::uint32_t hbits = 0; hbits < 0x7c00; ++hbits) {
    const float f = half_to_float(static_cast<std::uint16_t>(hbits));
    const int e = (hbits >> 10) & 31, m = hbits & 1023;
    const double expect = e == 0 ? std::ldexp(double(m), -24) : std::ldexp(1.0 + m / 1024.0, e - 15);
    REQUIRE(double(f) == expect);
  }
}

TEST_CASE("safetensors: malformed headers are rejected with a message", "[hf]") {
  const std::string ok = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  REQUIRE_NOTHROW(parse(image(ok, 8)));
  struct Case {
    const char* what;
    std::string img;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"shorter than 8 bytes", std::string("abc"), "fewer than the 8-byte"},
      {"oversized header length", le64(kMaxHeaderBytes + 1) + "{}", "exceeds the limit"},
      {"header past end of file", le64(1000) + "{}", "runs past the end"},
      {"not JSON", image("{\"x\":", 0), "not valid JSON"},
      {"not an object", image("[1,2]", 0), "does not start with '{'"},
      {"deep nesting", image("{\"a\":[[[[[[1]]]]]]}", 0), "nested deeper"},
      {"unknown dtype", image(R"({"x":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}})", 8), "unknown dtype 'F33'"},
      {"dtype not a string", image(R"({"x":{"dtype":4,"shape":[2],"data_offsets":[0,8]}})", 8), "dtype"},
      {"size mismatch (wrong dtype for the bytes)",
       image(R"({"x":{"dtype":"F64","shape":[2],"data_offsets":[0,8]}})", 8), "needs 16"},
      {"negative shape", image(R"({"x":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8), "non-negative"},
      {"float shape", image(R"({"x":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", 8), "non-negative"},
      {"overflowing shape", image(R"({"x":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8),
       "overflows"},
      {"end before begin", image(R"({"x":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", 8), "end before begin"},
      {"offset past data (truncated)", image(R"({"x":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8),
       "beyond the data region"},
      {"overlap",
       image(
           R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"y":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
           12),
       "overlaps"},
      {"gap", image(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8), "belong to no tensor"},
      {"trailing bytes", image(ok, 12), "trailing bytes"},
      {"unknown field", image(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"z":1}})", 8), "unknown field"},
      {"metadata not strings", image(R"({"__metadata__":{"a":1}})", 0), "not a string"},
      {"missing offsets", image(R"({"x":{"dtype":"F32","shape":[2]}})", 8), "data_offsets"},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    REQUIRE_THROWS_AS(parse(c.img), InvalidArgument);
    REQUIRE_THROWS_WITH(parse(c.img), Catch::Contains(c.message));
  }
}

TEST_CASE("safetensors: integer tensors parse but are refused as float", "[hf]") {
  const std::string img = image(R"({"x":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", 8);
  const Header h = parse(img);
  float f;
  REQUIRE_THROWS_WITH(convert_to_float(h.tensors[0].dtype, reinterpret_cast<const std::uint8_t*>(img.data()), 1, &f),
                      Catch::Contains("cannot be read as float"));
}

TEST_CASE("safetensors: mapped file, store shape check, shard names confined to the directory", "[hf]") {
  std::vector<float> a = {1, 2, 3, 4};
  write_safetensors("hf_unit.safetensors", {{"w", {2, 2}, a.data()}}, {});
  const TensorStore st("hf_unit.safetensors");
  CHECK(st.read("w", {2, 2}) == a);
  REQUIRE_THROWS_WITH(st.read("w", {4}), Catch::Contains("has shape [2, 2], expected [4]"));
  REQUIRE_THROWS_WITH(st.read("v", {4}), Catch::Contains("no tensor 'v'"));
  std::filesystem::create_directories("hf_unit_dir");
  std::ofstream("hf_unit_dir/model.safetensors.index.json") << R"({"weight_map":{"w":"../hf_unit.safetensors"}})";
  REQUIRE_THROWS_WITH(TensorStore("hf_unit_dir"), Catch::Contains("not a plain file name"));
  std::ofstream("hf_unit_dir/model.safetensors.index.json") << R"({"weight_map":{"v":"s.safetensors"}})";
  write_safetensors("hf_unit_dir/s.safetensors", {{"w", {2, 2}, a.data()}}, {});
  REQUIRE_THROWS_WITH(TensorStore("hf_unit_dir"), Catch::Contains("does not hold it"));
}

TEST_CASE("safetensors: empty tensors convert without touching memory (fuzz regression)", "[hf]") {
  // fuzz_safetensors found memcpy(nullptr, src, 0) for a [0, 3] F32 tensor read into an empty vector
  for (Dtype d : {Dtype::F32, Dtype::F16, Dtype::BF16, Dtype::F64})
    REQUIRE_NOTHROW(convert_to_float(d, nullptr, 0, nullptr));
}

TEST_CASE("hf checkpoint: a FIFO as safetensors file, shard or config.json is refused at once", "[hf]") {
  // Opening a FIFO with no writer used to block forever: the alarm fails a regression instead of
  // hanging the run.
  ::alarm(20);
  namespace fs = std::filesystem;
  fs::remove_all("hf_fifo");
  fs::create_directories("hf_fifo/single");
  REQUIRE(::mkfifo("hf_fifo/single/model.safetensors", 0600) == 0);
  REQUIRE_THROWS_WITH(SafetensorsFile("hf_fifo/single/model.safetensors"),
                      Catch::Contains("'hf_fifo/single/model.safetensors' is not a regular file (a FIFO)"));
  REQUIRE_THROWS_WITH(TensorStore("hf_fifo/single"), Catch::Contains("is not a regular file (a FIFO)"));
  fs::create_directories("hf_fifo/sharded");
  std::ofstream("hf_fifo/sharded/model.safetensors.index.json") << R"({"weight_map":{"w":"s.safetensors"}})";
  REQUIRE(::mkfifo("hf_fifo/sharded/s.safetensors", 0600) == 0);
  REQUIRE_THROWS_WITH(TensorStore("hf_fifo/sharded"), Catch::Contains("s.safetensors' is not a regular file (a FIFO)"));
  fs::create_directories("hf_fifo/config");
  REQUIRE(::mkfifo("hf_fifo/config/config.json", 0600) == 0);
  REQUIRE_THROWS_WITH(read_hf_config("hf_fifo/config"), Catch::Contains("config.json' is not a regular file (a FIFO)"));
  REQUIRE_THROWS_WITH(load_hf_model("hf_fifo/config"), Catch::Contains("is not a regular file (a FIFO)"));
  fs::remove_all("hf_fifo");
  ::alarm(0);
}

TEST_CASE("hf checkpoint: an untied GPT-2 head (tie_word_embeddings false) is read and exported", "[hf]") {
  // GPT2LMHeadModel with tie_word_embeddings false keeps lm_head.weight; the importer ignored the
  // flag and scored with wte (other logits, exit 0), and export dropped the head silently.
  namespace fs = std::filesystem;
  const nlohmann::json g = {{"model_type", "gpt2"}, {"vocab_size", 20}, {"n_embd", 8},
                            {"n_layer", 1},         {"n_head", 2},      {"n_positions", 8}};
  CHECK(parse_hf_config(g, "g").config.arch.tied_head);
  nlohmann::json u = g;
  u["tie_word_embeddings"] = false;
  nn::ModelConfig c = parse_hf_config(u, "u").config;
  REQUIRE_FALSE(c.arch.tied_head);
  CHECK(gpt2_export_blocker(c).empty());
  const nn::Model<float> m = nn::init_model<float>(c, 7);
  fs::remove_all("hf_untied");
  export_gpt2(m, "hf_untied");
  const nlohmann::json cj = nlohmann::json::parse(std::ifstream("hf_untied/config.json"));
  CHECK(cj["tie_word_embeddings"] == false);
  CHECK(TensorStore("hf_untied").has("lm_head.weight"));
  const nn::Model<float> back = load_hf_model("hf_untied");
  REQUIRE_FALSE(back.config.arch.tied_head);
  CHECK(back.params == m.params);  // lm_head.weight included, bit for bit
  fs::remove_all("hf_untied");
}
