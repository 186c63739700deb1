#include "compiler/ir/Ir.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "compiler/support/CheckedMath.h"

namespace nnc::ir {

namespace {
struct KindName {
  OpKind kind;
  const char *name;
};
constexpr KindName kKindNames[] = {
    {OpKind::Input, "input"},          {OpKind::Dense, "dense"},
    {OpKind::Conv2d, "conv2d"},        {OpKind::Depthwise, "depthwise"},
    {OpKind::MaxPool, "maxpool"},      {OpKind::AvgPool, "avgpool"},
    {OpKind::GlobalAvgPool, "global_avgpool"}, {OpKind::Flatten, "flatten"},
    {OpKind::Relu, "relu"},            {OpKind::Relu6, "relu6"},
    {OpKind::Sigmoid, "sigmoid"},      {OpKind::Tanh, "tanh"},
    {OpKind::Gelu, "gelu"},            {OpKind::GeluTanh, "gelu_tanh"},
    {OpKind::Silu, "silu"},            {OpKind::Softmax, "softmax"},
    {OpKind::Identity, "identity"},    {OpKind::Dropout, "dropout"},
    {OpKind::Lrn, "lrn"},              {OpKind::BatchNorm, "batchnorm"},
    {OpKind::LayerNorm, "layernorm"},  {OpKind::RmsNorm, "rmsnorm"},
    {OpKind::Embedding, "embedding"},  {OpKind::PosEmbedding, "pos_embedding"},
    {OpKind::Attention, "attention"},  {OpKind::Mlp, "mlp"},
    {OpKind::GatedMlp, "gated_mlp"},   {OpKind::Add, "add"},
};
} // namespace

const char *opKindName(OpKind k) {
  for (const auto &kn : kKindNames)
    if (kn.kind == k) return kn.name;
  return "?";
}

std::optional<OpKind> opKindFromName(const std::string &name) {
  for (const auto &kn : kKindNames)
    if (name == kn.name && kn.kind != OpKind::Input && kn.kind != OpKind::Add) return kn.kind;
  return std::nullopt;
}

std::vector<std::string> layerKindNames() {
  std::vector<std::string> out;
  for (const auto &kn : kKindNames)
    if (kn.kind != OpKind::Input && kn.kind != OpKind::Add) out.push_back(kn.name);
  return out;
}

bool isElementwiseActivation(OpKind k) {
  switch (k) {
  case OpKind::Relu: case OpKind::Relu6: case OpKind::Sigmoid: case OpKind::Tanh:
  case OpKind::Gelu: case OpKind::GeluTanh: case OpKind::Silu:
    return true;
  default:
    return false;
  }
}

int64_t TensorType::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n = mulChecked(n, d);
  return n;
}

std::string TensorType::str() const {
  return fmt::format("{}[{}]", dtypeName(dtype), fmt::join(shape, ", "));
}

int64_t ParamTensor::count() const {
  int64_t n = 1;
  for (int64_t d : shape) n = mulChecked(n, d);
  return n;
}

} // namespace nnc::ir
