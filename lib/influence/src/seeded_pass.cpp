// The CPU's seeded pass, see cf/influence/seeded_pass.hpp.
#include "cf/influence/seeded_pass.hpp"

#include <algorithm>
#include <memory>

namespace cf::influence {

template <class T>
nn::SeededPass<T> seeded_pass_or_cpu(const nn::Model<T>& model, const nn::SeededPass<T>& pass) {
  if (pass) return pass;
  struct State {
    std::vector<T> scratch;
    nn::Workspace<T> ws;
  };
  auto st = std::make_shared<State>();  // std::function copies its target: the state is shared
  st->scratch.resize(static_cast<std::size_t>(model.layout.total));
  return [&model, st](const std::int32_t* tokens, const std::int32_t* targets, int B, int Tn,
                      const nn::GradientSeed<T>& seed) {
    std::fill(st->scratch.begin(), st->scratch.end(), T(0));
    return nn::forward_backward<T>(model, tokens, targets, B, Tn, &st->scratch, st->ws, nullptr, nullptr, &seed);
  };
}

template nn::SeededPass<float> seeded_pass_or_cpu<float>(const nn::Model<float>&, const nn::SeededPass<float>&);
template nn::SeededPass<double> seeded_pass_or_cpu<double>(const nn::Model<double>&, const nn::SeededPass<double>&);

}  // namespace cf::influence
