#include "analysis_weights.hpp"

#include <map>

#include "cf/core/error.hpp"
#include "cf/gpu/analysis_model.hpp"
#include "cf/hf/checkpoint.hpp"
#include "cf/nn/params.hpp"

namespace cf::gpu::stored {

namespace {

// The lib/nn tensors a GEMM reads as a matrix (kept in the stored dtype); wte is also the tied head.
bool is_matrix(const std::string& name) {
  if (name == "wte.weight" || name == "lm_head.weight") return true;
  for (const std::string end : {".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight"})
    if (name.size() > end.size() && name.compare(name.size() - end.size(), end.size(), end) == 0) return true;
  return false;
}

WeightType weight_type(hf::Dtype d) {
  return d == hf::Dtype::BF16 ? WeightType::BF16 : d == hf::Dtype::F16 ? WeightType::F16 : WeightType::F32;
}

std::string shape_text(const std::vector<std::int64_t>& s) {
  std::string t = "[";
  for (std::size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

// make_analysis_plan's plan with compact offsets: matrices in one array, the rest in another.
// `where` maps each lib/nn offset to (matrix?, compact offset).
AnalysisPlan compact_plan(const nn::ModelConfig& c, WeightType wtype,
                          std::map<std::int64_t, std::pair<bool, std::int64_t>>& where) {
  AnalysisPlan p = make_analysis_plan(c);
  const nn::ParamLayout lay = nn::make_layout(c);
  std::int64_t mats = 0, floats = 0;
  for (const nn::ParamInfo& t : lay.tensors) {
    std::int64_t n = 1;
    for (auto s : t.shape) n *= s;
    const bool m = is_matrix(t.name);
    where[t.offset] = {m, m ? mats : floats};
    (m ? mats : floats) += n;
  }
  const auto re = [&where](std::int64_t& off) {
    if (off >= 0) off = where.at(off).second;
  };
  for (std::int64_t* f : {&p.wte, &p.wpe, &p.emb_ln_w, &p.emb_ln_b, &p.lnf_w, &p.lnf_b, &p.head}) re(*f);
  for (AnalysisLayer& l : p.layers)
    for (std::int64_t* f : {&l.ln1_w, &l.ln1_b, &l.attn_w, &l.attn_b, &l.proj_w, &l.proj_b, &l.ln2_w, &l.ln2_b, &l.fc_w,
                            &l.fc_b, &l.fcproj_w, &l.fcproj_b})
      re(*f);
  p.one_array = false;
  p.wtype = wtype;
  p.total = floats;
  p.mat_total = mats;
  return p;
}

}  // namespace

StoredModel open_stored(const std::string& dir) {
  hf::check_export_weights(dir);
  StoredModel m;
  m.hf = hf::read_hf_config(dir);
  const std::string label = str("Hugging Face checkpoint '", dir, "' (", m.hf.model_type, ")");
  const std::string why = device_analysis_unsupported(m.hf.config);
  require(why.empty(), "the device analysis model does not support ", why,
          " (docs/gpu.md \"Analysis model\"); use --device cpu");
  m.store = std::make_unique<hf::WeightStore>(dir);
  const hf::WeightStore& ws = *m.store;
  m.pieces = hf::tensor_pieces(m.hf.family, m.hf.config, [&ws](const std::string& n) { return ws.has(n); });
  // every tensor checked before any device memory is taken (issue 29: a config far beyond its
  // tensors must not allocate first)
  std::vector<hf::Dtype> mat_dtypes;
  for (const hf::TensorPiece& pc : m.pieces) {
    require(ws.has(pc.hf), label, ": tensor '", pc.hf, "' is missing");
    const hf::StoredTensor& t = ws.tensor(pc.hf);
    require(t.shape == pc.shape, label, ": tensor '", pc.hf, "' has shape ", shape_text(t.shape),
            " but config.json implies ", shape_text(pc.shape));
    require(t.dtype == hf::Dtype::F32 || t.dtype == hf::Dtype::BF16 || t.dtype == hf::Dtype::F16, label, ": tensor '",
            pc.hf, "' is ", hf::dtype_name(t.dtype),
            ": weights kept in their stored dtype are F32, BF16 or F16 (use --weights float32)");
    if (is_matrix(pc.cf)) mat_dtypes.push_back(t.dtype);
  }
  WeightType wtype = mat_dtypes.empty() ? WeightType::F32 : weight_type(mat_dtypes.front());
  for (hf::Dtype d : mat_dtypes)
    if (weight_type(d) != wtype) wtype = WeightType::F32;  // mixed: float32 holds each exactly
  std::map<std::int64_t, std::pair<bool, std::int64_t>> where;
  m.plan = compact_plan(m.hf.config, wtype, where);
  const nn::ParamLayout lay = nn::make_layout(m.hf.config);
  for (const hf::TensorPiece& pc : m.pieces) {
    const auto& [matrix, off] = where.at(lay.find(pc.cf).offset);
    m.to_matrix.push_back(matrix);
    m.dst.push_back(off + pc.at);
  }
  return m;
}

hf::StageStats stage_stored(const StoredModel& m, std::uint8_t* staging, std::size_t bytes,
                            const std::function<void(const WeightChunk&)>& place) {
  require(bytes >= 4 && bytes % 4 == 0, "staging buffer of ", bytes, " bytes: need a positive multiple of 4");
  std::multimap<std::string, std::size_t> by_name;
  std::vector<std::string> names;
  std::vector<std::vector<std::int64_t>> inverse(m.pieces.size());
  for (std::size_t i = 0; i < m.pieces.size(); ++i) {
    by_name.emplace(m.pieces[i].hf, i);
    names.push_back(m.pieces[i].hf);
    if (m.pieces[i].op == hf::PieceOp::Rows) inverse[i] = m.pieces[i].inverse_rows();
  }
  return m.store->stage(names, staging, bytes, [&](const hf::StagedChunk& c) {
    const std::size_t el = hf::dtype_size(c.tensor->dtype);
    const auto [lo, hi] = by_name.equal_range(c.tensor->name);
    for (auto it = lo; it != hi; ++it) {
      const hf::TensorPiece& pc = m.pieces[it->second];
      WeightChunk w;
      w.src = weight_type(c.tensor->dtype);
      w.data = c.data;
      w.first = static_cast<std::int64_t>(c.tensor_offset / el);
      w.count = static_cast<std::int64_t>(c.bytes / el);
      w.matrix = m.to_matrix[it->second];
      w.dst = m.dst[it->second];
      w.op = pc.op == hf::PieceOp::Copy        ? PlaceOp::Copy
             : pc.op == hf::PieceOp::Transpose ? PlaceOp::Transpose
                                               : PlaceOp::Rows;
      w.rows = pc.shape.empty() ? 1 : pc.shape[0];
      w.cols = pc.op == hf::PieceOp::Rows ? pc.cols : pc.shape.size() > 1 ? pc.shape[1] : 1;
      w.inverse = inverse[it->second].data();
      place(w);
    }
  });
}

}  // namespace cf::gpu::stored
