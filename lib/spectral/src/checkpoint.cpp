#include "cf/spectral/checkpoint.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <sstream>

#include "cf/core/error.hpp"
#include "cf/core/json.hpp"
#include "cf/core/list.hpp"
#include "cf/core/model_folder.hpp"
#include "cf/io/hdf5.hpp"
#include "cf/model/load.hpp"
#include "cf/nn/model.hpp"

namespace cf::spectral {

namespace {
// The attention weights of a loaded model (a Hugging Face checkpoint directory, issue 13): the query
// rows of c_attn, then for each head the key rows of its key/value head (grouped-query attention
// shares one key head among n_head / n_kv_head query heads).
AttentionWeights weights_of_model(const nn::Model<float>& m) {
  const nn::ModelConfig& c = m.config;
  AttentionWeights w;
  w.config = nn::to_json(c);
  w.n_layer = c.n_layer;
  w.n_head = c.n_head;
  w.d_model = c.d_model;
  w.pos = nn::pos_name(c.pos);
  w.norm = nn::norm_name(c.norm);
  const std::size_t C = static_cast<std::size_t>(c.d_model);
  const int group = c.n_head / nn::kv_heads(c);
  for (int l = 0; l < c.n_layer; ++l) {
    LayerWeights lw;
    lw.attn = nn::attn_name(c.layers[static_cast<std::size_t>(l)].attn);
    lw.n_head = c.n_head;
    lw.d_head = nn::head_dim(c, l);
    lw.d_model = c.d_model;
    const std::size_t blk = static_cast<std::size_t>(lw.d_head) * C, H = static_cast<std::size_t>(c.n_head);
    const float* W = m.params.data() + m.layout.layer[static_cast<std::size_t>(l)].attn_w;
    lw.qk.assign(W, W + H * blk);
    for (std::size_t h = 0; h < H; ++h) {
      const float* k = W + (H + h / static_cast<std::size_t>(group)) * blk;
      lw.qk.insert(lw.qk.end(), k, k + blk);
    }
    w.layers.push_back(std::move(lw));
  }
  return w;
}
}  // namespace

AttentionWeights read_attention_weights(const std::string& path) {
  refuse_model_folder_member(path);  // DIR/model.safetensors: point at DIR, not "not an HDF5 file"
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    AttentionWeights w = weights_of_model(cf::model::load_model(path));
    w.path = path;
    return w;
  }
  io::File f = io::File::open(path);
  require(f.has_attr("config"), "checkpoint '", path,
          "' has no `config` attribute: not a causalflow checkpoint (see docs/checkpoint_format.md)");
  AttentionWeights w;
  w.path = path;
  try {
    w.config = cf::parse_json(f.attr_string("config"), "config attribute");
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(str("checkpoint '", path, "': `config` is not valid JSON (", e.what(), ")"));
  }
  const auto& c = w.config;
  require(c.is_object(), "checkpoint '", path, "': `config` must be a JSON object");
  // Typed, range-checked reads naming the field (a damaged config is exit 2 with the field, never
  // a raw JSON exception); the ranges are lib/nn's (cf::nn::validate), which keeps 3 H d_head
  // below 2^31.
  auto int_field = [&](const nlohmann::json& obj, const std::string& where, const char* key, int fallback, int lo,
                       int hi, bool required) {
    if (!obj.contains(key)) {
      require(!required, "checkpoint '", path, "': config lacks integer '", where, key, "'");
      return fallback;
    }
    const auto& v = obj[key];
    require(v.is_number_integer() && v.get<long long>() >= lo && v.get<long long>() <= hi, "checkpoint '", path,
            "': config field '", where, key, "' must be an integer in [", lo, ", ", hi, "] (got ", v.dump(), ")");
    return v.get<int>();
  };
  auto string_field = [&](const nlohmann::json& obj, const std::string& where, const char* key,
                          const std::string& fallback) {
    if (!obj.contains(key)) return fallback;
    require(obj[key].is_string(), "checkpoint '", path, "': config field '", where, key, "' must be a string (got ",
            obj[key].dump(), ")");
    return obj[key].get<std::string>();
  };
  w.n_layer = int_field(c, "", "n_layer", 0, 1, 256, true);
  w.n_head = int_field(c, "", "n_head", 0, 1, 1024, true);
  w.d_model = int_field(c, "", "d_model", 0, 1, 65536, true);
  w.pos = string_field(c, "", "pos", "learned");
  w.norm = string_field(c, "", "norm", "layernorm");
  require(!c.contains("layers") || c["layers"].is_array(), "checkpoint '", path,
          "': config field 'layers' must be an array");
  require(f.has("params"), "checkpoint '", path, "' has no /params group: a checkpoint without attention weights");
  const io::Group params = f.open_group("params");
  for (int l = 0; l < w.n_layer; ++l) {
    nlohmann::json lc = nlohmann::json::object();
    if (c.contains("layers") && l < int(c["layers"].size())) lc = c["layers"][l];
    const std::string where = str("layers[", l, "].");
    require(lc.is_object(), "checkpoint '", path, "': config field 'layers[", l, "]' must be an object");
    const std::string attn = string_field(lc, where, "attn", "full");
    int d_head = int_field(lc, where, "d_head", 0, 0, 4096, false);
    if (d_head == 0) d_head = w.d_model / w.n_head;
    const std::string name = str("h.", l, ".attn.c_attn.weight");
    require(params.has(name), "checkpoint '", path, "' has no attention weights: /params/", name,
            " is missing (a checkpoint without attention weights cannot be analysed)");
    const io::Shape shape = params.dataset_shape(name);
    require(shape.size() == 2 && shape[0] == std::size_t(3 * w.n_head * d_head) && shape[1] == std::size_t(w.d_model),
            "checkpoint '", path, "': /params/", name, " has shape ", io::shape_string(shape), ", expected [",
            3 * w.n_head * d_head, ", ", w.d_model, "] (3 H d_head, d_model)");
    // Only the Q and K rows (the first 2 H d_head), as stored (float32): the row-major
    // [2 H d_head, d_model] block is the column-major d_model x 2 H d_head matrix whose column
    // h*d_head + c is column c of W_Q(h) -- no transposes, and the read buffer is kept as is.
    const std::size_t qk_rows = std::size_t(2 * w.n_head * d_head);
    LayerWeights lw;
    lw.attn = attn;
    lw.n_head = w.n_head;
    lw.d_head = d_head;
    lw.d_model = w.d_model;
    lw.qk = std::move(params.read_rows<float>(name, 0, qk_rows).data);
    if (attn == "sd") {
      if (lc.contains("sd_eps"))
        require(lc["sd_eps"].is_number() && std::isfinite(lc["sd_eps"].get<double>()), "checkpoint '", path,
                "': config field '", where, "sd_eps' must be a finite number (got ", lc["sd_eps"].dump(), ")");
      lw.sd_eps = lc.value("sd_eps", 0.0);
      const std::string dw = str("h.", l, ".attn.damp.weight"), db = str("h.", l, ".attn.damp.bias");
      require(params.has(dw) && params.has(db), "checkpoint '", path, "': S-D layer ", l, " lacks /params/", dw, " or ",
              db);
      lw.damp_w = params.read_matrix<double>(dw);
      lw.damp_b = params.read_vector<double>(db);
      require(lw.damp_w.rows() == w.n_head && lw.damp_w.cols() == w.d_model && lw.damp_b.size() == w.n_head,
              "checkpoint '", path, "': S-D damping of layer ", l, " must be [H, d_model] and [H]");
    }
    w.layers.push_back(std::move(lw));
  }
  return w;
}

std::vector<int> parse_layer_spec(const std::string& spec, int n_layer, const std::string& option) {
  require(n_layer >= 1, "n_layer must be >= 1 (got ", n_layer, ")");
  std::vector<int> out;
  if (spec == "all") {
    for (int l = 0; l < n_layer; ++l) out.push_back(l);
    return out;
  }
  std::set<int> s;
  // `item` is the comma item as typed ("-1", "1-x"), quoted in the message rather than the
  // empty or partial piece of it that failed to parse.
  auto to_int = [&](const std::string& t, const std::string& item) {
    std::size_t pos = 0;
    int v = 0;
    try {
      v = std::stoi(t, &pos);
    } catch (const std::exception&) {
      pos = 0;
    }
    require(pos == t.size() && !t.empty(), "layer spec '", spec, "': '", item,
            "' is not a layer index or range (allowed: all, L, A-B or a comma list of them, with 0 <= layer < n_layer "
            "= ",
            n_layer, ")");
    require(v >= 0 && v < n_layer, "layer spec '", spec, "': layer ", v,
            " is out of range (0 <= layer < n_layer = ", n_layer, ")");
    return v;
  };
  for (const std::string& item : split_list(spec, option)) {
    const auto dash = item.find('-');
    if (dash == std::string::npos) {
      s.insert(to_int(item, item));
    } else {
      const int a = to_int(item.substr(0, dash), item), b = to_int(item.substr(dash + 1), item);
      require(a <= b, "layer spec '", spec, "': range ", a, "-", b, " is empty (need A <= B)");
      for (int l = a; l <= b; ++l) s.insert(l);
    }
  }
  require(!s.empty(), "layer spec '", spec, "' selects no layer");
  return {s.begin(), s.end()};
}

}  // namespace cf::spectral
