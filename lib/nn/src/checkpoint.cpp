#include "cf/nn/checkpoint.hpp"

#include <cmath>
#include <filesystem>
#include <limits>

#include "cf/core/error.hpp"
#include "cf/core/json.hpp"
#include "cf/core/model_folder.hpp"
#include "cf/hf/checkpoint.hpp"
#include "cf/io/hdf5.hpp"

namespace cf::nn {

namespace {
io::Shape shape_of(const ParamInfo& t) { return io::Shape(t.shape.begin(), t.shape.end()); }

// A NaN or inf weight makes every downstream number NaN (or, through a max or a sort, a silently
// wrong finite one: jacobian reported C = 0 for a layer with one NaN weight); train never writes
// one (it stops first), so a file that holds one was damaged or made elsewhere: refused (exit 2).
void require_finite(const std::vector<float>& values, const ParamLayout& layout, const std::string& path,
                    const char* what) {
  for (const auto& t : layout.tensors)
    for (std::int64_t i = 0; i < t.size; ++i)
      if (!std::isfinite(values[static_cast<std::size_t>(t.offset + i)]))
        throw InvalidArgument(str("'", path, "': ", what, " '", t.name, "' holds a non-finite value (",
                                  values[static_cast<std::size_t>(t.offset + i)], " at element ", i,
                                  "); the file is damaged or was not written by a finished update"));
}
}  // namespace

void save_checkpoint(const std::string& path, const Checkpoint& ck) {
  const auto& lay = ck.model.layout;
  io::write_hdf5_atomic(path, [&](io::File& f) {
    f.set_attr("format", std::string("causalflow-checkpoint"));
    f.set_attr("format_version", std::int64_t{1});
    f.set_attr("config", to_json(ck.model.config).dump());
    f.set_attr("step", static_cast<std::int64_t>(ck.step));
    f.set_attr("train_config", ck.train_config.dump());
    if (ck.has_best_val) f.set_attr("best_val_loss", ck.best_val_loss);
    io::Group p = f.create_group("params");
    for (const auto& t : lay.tensors) p.write(t.name, ck.model.params.data() + t.offset, shape_of(t));
    if (!ck.optim.m.empty()) {
      io::Group o = f.create_group("optim");
      o.set_attr("t", static_cast<std::int64_t>(ck.optim.t));
      io::Group m = o.create_group("m"), v = o.create_group("v");
      for (const auto& t : lay.tensors) {
        m.write(t.name, ck.optim.m.data() + t.offset, shape_of(t));
        v.write(t.name, ck.optim.v.data() + t.offset, shape_of(t));
      }
    }
  });
}

Checkpoint load_checkpoint(const std::string& path, bool with_optimizer) {
  io::File f = io::File::open(path);
  require(f.has_attr("format") && f.attr_string("format") == "causalflow-checkpoint", "'", path,
          "' is not a causalflow checkpoint (root attribute format != \"causalflow-checkpoint\")");
  require(f.attr_int("format_version") == 1, "'", path, "': unsupported format_version ", f.attr_int("format_version"),
          " (this build reads 1)");
  Checkpoint ck;
  nlohmann::json cj;
  try {
    cj = cf::parse_json(f.attr_string("config"), path);
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(str("'", path, "': config attribute is not valid JSON: ", e.what()));
  }
  ck.model.config = config_from_json(cj);
  ck.model.layout = make_layout(ck.model.config);
  ck.model.params.assign(static_cast<std::size_t>(ck.model.layout.total), 0.f);
  ck.step = f.has_attr("step") ? f.attr_int("step") : 0;
  // a negative step would resume with a negative learning-rate schedule position
  require(ck.step >= 0, "'", path, "': step attribute must be >= 0 (got ", ck.step, ")");
  if (f.has_attr("train_config")) {
    try {
      ck.train_config = cf::parse_json(f.attr_string("train_config"), path);
    } catch (const nlohmann::json::exception& e) {
      // never resume with defaults in place of the run's own options
      throw InvalidArgument(str("'", path, "': train_config attribute is not valid JSON: ", e.what()));
    }
    require(ck.train_config.is_object(), "'", path, "': train_config attribute is not a JSON object");
  }
  if (f.has_attr("best_val_loss")) {
    ck.best_val_loss = f.attr_double("best_val_loss");
    // NaN or -inf would never be beaten: best.h5 would silently stop being written
    require(!std::isnan(ck.best_val_loss) && ck.best_val_loss > -std::numeric_limits<double>::infinity(), "'", path,
            "': best_val_loss attribute must be a number or +inf (got ", ck.best_val_loss, ")");
    ck.has_best_val = true;
  }
  io::Group p = f.open_group("params");
  for (const auto& t : ck.model.layout.tensors) p.read_into(t.name, ck.model.params.data() + t.offset, shape_of(t));
  require_finite(ck.model.params, ck.model.layout, path, "parameter");
  if (with_optimizer && f.has("optim")) {
    io::Group o = f.open_group("optim");
    ck.optim.t = o.attr_int("t");
    require(ck.optim.t >= 0, "'", path, "': optim/t (AdamW's step count) must be >= 0 (got ", ck.optim.t, ")");
    ck.optim.m.assign(ck.model.params.size(), 0.f);
    ck.optim.v.assign(ck.model.params.size(), 0.f);
    io::Group m = o.open_group("m"), v = o.open_group("v");
    for (const auto& t : ck.model.layout.tensors) {
      m.read_into(t.name, ck.optim.m.data() + t.offset, shape_of(t));
      v.read_into(t.name, ck.optim.v.data() + t.offset, shape_of(t));
    }
    require_finite(ck.optim.m, ck.model.layout, path, "AdamW first moment of");
    require_finite(ck.optim.v, ck.model.layout, path, "AdamW second moment of");
  }
  return ck;
}

Model<float> load_model(const std::string& checkpoint_path) {
  // DIR/model.safetensors said "not an HDF5 file" without pointing at the folder
  refuse_model_folder_member(checkpoint_path);
  std::error_code ec;
  if (std::filesystem::is_directory(checkpoint_path, ec)) {
    Model<float> m = hf::load_hf_model(checkpoint_path);
    require_finite(m.params, m.layout, checkpoint_path, "parameter");
    return m;
  }
  return load_checkpoint(checkpoint_path, false).model;
}

}  // namespace cf::nn
