#pragma once
// Where influence and the Jacobian blocks run their seeded backward passes (issue 30): a
// cf::nn::SeededPass given by the caller (the tools wire lib/gpu's device trainer in for --device
// cuda; lib/influence does not depend on lib/gpu), or cf::nn::forward_backward on the CPU.
#include "cf/nn/model.hpp"

namespace cf::influence {

/// `pass` when it is set, else cf::nn::forward_backward on `model` (which must outlive the result)
/// with one scratch parameter gradient (zeroed per call) and one workspace for all calls.
template <class T>
nn::SeededPass<T> seeded_pass_or_cpu(const nn::Model<T>& model, const nn::SeededPass<T>& pass);

}  // namespace cf::influence
