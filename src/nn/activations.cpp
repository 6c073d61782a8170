// The layers of sinter/nn/activations.h: the activations, Identity and Unflatten over the ops of
// sinter/ops.h, and the containers ModuleDict and ParameterList over Module's registry.
#include "sinter/nn/activations.h"

#include <algorithm>
#include <string>

#include "sinter/autograd.h"
#include "sinter/ops.h"

namespace sinter::nn {

ELU::ELU(double alpha) : alpha(alpha) {}

Tensor ELU::forward(const Tensor& x) { return elu(x, alpha); }

Tensor SELU::forward(const Tensor& x) { return selu(x); }

Tensor Mish::forward(const Tensor& x) { return mish(x); }

Tensor Hardswish::forward(const Tensor& x) { return hardswish(x); }

Tensor Hardsigmoid::forward(const Tensor& x) { return hardsigmoid(x); }

PReLU::PReLU(int64_t num_parameters, double init) : num_parameters(num_parameters), init(init) {
  SINTER_CHECK(num_parameters >= 1, "PReLU: num_parameters must be >= 1, got ", num_parameters);
  weight = register_parameter("weight", empty({num_parameters}));
  reset_parameters();
}

void PReLU::reset_parameters() {
  NoGradGuard ng;
  weight.fill_(init);
}

Tensor PReLU::forward(const Tensor& x) { return prelu(x, weight); }

Softmax::Softmax(int64_t dim) : dim(dim) {}

Tensor Softmax::forward(const Tensor& x) { return softmax(x, dim); }

LogSoftmax::LogSoftmax(int64_t dim) : dim(dim) {}

Tensor LogSoftmax::forward(const Tensor& x) { return log_softmax(x, dim); }

Tensor Identity::forward(const Tensor& x) { return x; }

Unflatten::Unflatten(int64_t dim, Shape sizes) : dim(dim), sizes(std::move(sizes)) {
  SINTER_CHECK(!this->sizes.empty(), "Unflatten: sizes is empty");
  SINTER_CHECK(
      std::count(this->sizes.begin(), this->sizes.end(), -1) <= 1 &&
          std::all_of(this->sizes.begin(), this->sizes.end(), [](int64_t s) { return s >= -1; }),
      "Unflatten: sizes ", shape_str(this->sizes), " must be sizes >= 0 with at most one -1");
}

Tensor Unflatten::forward(const Tensor& x) {
  SINTER_CHECK(x.defined(), "Unflatten: undefined input");
  const int64_t n = x.dim();
  const int64_t d = dim < 0 ? dim + n : dim;
  SINTER_CHECK(d >= 0 && d < n, "Unflatten: dim ", dim, " is out of range for an input of shape ",
               shape_str(x.shape()));
  int64_t known = 1;
  for (int64_t s : sizes) known *= s == -1 ? 1 : s;
  const int64_t size = x.size(d);
  const bool inferred = std::count(sizes.begin(), sizes.end(), -1) == 1;
  SINTER_CHECK(inferred ? known > 0 && size % known == 0 : known == size, "Unflatten: sizes ",
               shape_str(sizes), " do not split dim ", dim, " of size ", size, " (input shape ",
               shape_str(x.shape()), ")");
  Shape shape(x.shape().begin(), x.shape().begin() + d);
  for (int64_t s : sizes) shape.push_back(s == -1 ? size / known : s);
  shape.insert(shape.end(), x.shape().begin() + d + 1, x.shape().end());
  return x.reshape(shape);
}

ModuleDict::ModuleDict(
    const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& modules) {
  for (const auto& [key, module] : modules) register_module(key, module);
}

bool ModuleDict::contains(const std::string& key) const {
  return std::any_of(named_children().begin(), named_children().end(),
                     [&](const auto& child) { return child.first == key; });
}

const std::shared_ptr<Module>& ModuleDict::operator[](const std::string& key) const {
  for (const auto& [k, module] : named_children()) {
    if (k == key) return module;
  }
  std::string have;
  for (const std::string& k : keys()) have += (have.empty() ? "" : ", ") + k;
  SINTER_THROW(name(), ": no module '", key, "' (keys: ", have.empty() ? "none" : have, ")");
}

std::vector<std::string> ModuleDict::keys() const {
  std::vector<std::string> out;
  for (const auto& child : named_children()) out.push_back(child.first);
  return out;
}

ParameterList::ParameterList(const std::vector<Tensor>& parameters) {
  for (const Tensor& p : parameters) push_back(p);
}

Tensor ParameterList::push_back(Tensor parameter) {
  return register_parameter(std::to_string(size()), std::move(parameter));
}

const Tensor& ParameterList::operator[](size_t i) const {
  SINTER_CHECK(i < size(), name(), ": index ", i, " is out of range for ", size(), " parameters");
  return own_parameters()[i].second;
}

}  // namespace sinter::nn
