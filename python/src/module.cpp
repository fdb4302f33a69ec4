// The extension causalflow._causalflow: one submodule per library, each bound in its own file
// (python/src/<submodule>.cpp). The package python/causalflow re-exports them (docs/python.md).
#include "cf/core/version.hpp"
#include "convert.hpp"

namespace cfpy {
void bind_graph(py::module_& m);
void bind_rollout(py::module_& m);
void bind_spectral(py::module_& m);
void bind_model(py::module_& m);
void bind_influence(py::module_& m);
void bind_probe(py::module_& m);
void bind_train(py::module_& m);
}  // namespace cfpy

PYBIND11_MODULE(_causalflow, m) {
  namespace py = pybind11;
  m.doc() = "causalflow: information flow in causal transformers (C++ core; see the package causalflow)";
  m.attr("__version__") = cf::kVersion;
  m.attr("git_revision") = cf::kGitRevision;
  cfpy::register_errors();
  auto graph = m.def_submodule("graph");
  cfpy::bind_graph(graph);
  auto rollout = m.def_submodule("rollout");
  cfpy::bind_rollout(rollout);
  auto spectral = m.def_submodule("spectral");
  cfpy::bind_spectral(spectral);
  auto model = m.def_submodule("model");
  cfpy::bind_model(model);
  auto influence = m.def_submodule("influence");
  cfpy::bind_influence(influence);
  auto probe = m.def_submodule("probe");
  cfpy::bind_probe(probe);
  auto train = m.def_submodule("train");
  cfpy::bind_train(train);
}
