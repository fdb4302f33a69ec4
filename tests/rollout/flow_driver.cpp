// Test driver of the attention flow solvers (cf/rollout/flow.hpp) for the networkx oracle
// (tests/rollout/flow_networkx.py): reads residual-mixed kernels R exactly as the oracle built
// them and prints every source's flow to the last position with the min-cut capacity, as JSON.
// Input file: a line "L n", then L * n rows of n numbers (R_1 first). Bad input: a message, exit 2.
// Usage: flow_driver ALGORITHM FILE   (ALGORITHM: layered | bk | push-relabel)
#include <cstdio>
#include <exception>
#include <fstream>
#include <string>

#include "cf/core/error.hpp"
#include "cf/rollout/flow.hpp"

using namespace cf::rollout;

namespace {

std::vector<RowMatrix> read_kernels(const std::string& path) {
  std::ifstream f(path);
  cf::require(f.good(), "flow_driver: cannot read ", path);
  long L = 0, n = 0;
  cf::require(static_cast<bool>(f >> L >> n) && L >= 1 && n >= 1, "flow_driver: ", path, ": first line must be 'L n'");
  std::vector<RowMatrix> R(L, RowMatrix(n, n));
  for (auto& M : R)
    for (long i = 0; i < n; ++i)
      for (long j = 0; j < n; ++j)
        cf::require(static_cast<bool>(f >> M(i, j)), "flow_driver: ", path, ": too few numbers");
  return R;
}

void print_array(const char* name, const Eigen::VectorXd& v, bool last) {
  std::printf("\"%s\": [", name);
  for (long j = 0; j < v.size(); ++j) std::printf("%s%.17g", j ? ", " : "", v(j));
  std::printf("]%s\n", last ? "" : ",");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    cf::require(argc == 3, "usage: flow_driver ALGORITHM FILE");
    FlowOptions o;
    o.algorithm = parse_flow_algorithm(argv[1], "ALGORITHM");
    const FlowResult fr = attention_flow(read_kernels(argv[2]), o);
    std::printf("{\"algorithm\": \"%s\", \"max_phases\": %ld, \"arcs_scanned\": %lld,\n", argv[1], fr.max_phases,
                static_cast<long long>(fr.arcs_scanned));
    print_array("flow", fr.flow, false);
    print_array("cut", fr.cut, true);
    std::printf("}\n");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
}
