#include "compiler/frontend/LayerOptions.h"

#include <fmt/format.h>

namespace nnc {
using K = OptionSpec::Kind;
using ir::OpKind;

namespace {
OptionSpec req(const char *n, K k, int64_t min = 1) { return {n, k, true, min}; }
OptionSpec opt(const char *n, K k, int64_t min = 0) { return {n, k, false, min}; }
const OptionSpec kDType = opt("dtype", K::DType);

const std::vector<LayerSpec> &table() {
  static const std::vector<LayerSpec> specs = [] {
    std::vector<LayerSpec> t = {
        {OpKind::Dense, {req("out", K::Int), opt("in", K::Int, 1), opt("bias", K::Bool),
                         opt("tie", K::LayerName), kDType}},
        {OpKind::Conv2d, {req("out", K::Int), req("kernel", K::Pair), opt("stride", K::Pair, 1),
                          opt("pad", K::Pair, 0), opt("groups", K::Int, 1), opt("bias", K::Bool), kDType}},
        {OpKind::Depthwise, {req("kernel", K::Pair), opt("stride", K::Pair, 1), opt("pad", K::Pair, 0),
                             opt("multiplier", K::Int, 1), opt("bias", K::Bool), kDType}},
        {OpKind::MaxPool, {req("kernel", K::Pair), opt("stride", K::Pair, 1), opt("pad", K::Pair, 0)}},
        {OpKind::AvgPool, {req("kernel", K::Pair), opt("stride", K::Pair, 1), opt("pad", K::Pair, 0)}},
        {OpKind::Dropout, {opt("p", K::Float)}},
        {OpKind::Lrn, {req("size", K::Int), opt("alpha", K::Float), opt("beta", K::Float), opt("k", K::Float)}},
        {OpKind::BatchNorm, {opt("eps", K::Float), kDType}},
        {OpKind::LayerNorm, {opt("eps", K::Float), opt("bias", K::Bool), kDType}},
        {OpKind::RmsNorm, {opt("eps", K::Float), kDType}},
        {OpKind::Embedding, {req("vocab", K::Int), req("dim", K::Int), kDType}},
        {OpKind::PosEmbedding, {req("max_len", K::Int), kDType}},
        {OpKind::Attention, {req("heads", K::Int), opt("kv_heads", K::Int, 1), opt("bias", K::Bool),
                             opt("causal", K::Bool), opt("rope", K::Bool), opt("rope_theta", K::Float), kDType}},
        {OpKind::Mlp, {req("hidden", K::Int), opt("act", K::Activation), opt("bias", K::Bool), kDType}},
        {OpKind::GatedMlp, {req("hidden", K::Int), opt("act", K::Activation), opt("bias", K::Bool), kDType}},
    };
    // Layers without options.
    for (OpKind k : {OpKind::GlobalAvgPool, OpKind::Flatten, OpKind::Relu, OpKind::Relu6,
                     OpKind::Sigmoid, OpKind::Tanh, OpKind::Gelu, OpKind::GeluTanh, OpKind::Silu,
                     OpKind::Softmax, OpKind::Identity})
      t.push_back({k, {}});
    return t;
  }();
  return specs;
}
} // namespace

const LayerSpec &layerSpec(OpKind kind) {
  for (const auto &s : table())
    if (s.kind == kind) return s;
  static const LayerSpec none{OpKind::Identity, {}};
  return none;
}

const char *optionKindName(K k) {
  switch (k) {
  case K::Int: return "an integer";
  case K::Pair: return "an integer or a pair (h, w)";
  case K::Bool: return "true or false";
  case K::Float: return "a number";
  case K::DType: return "a dtype (f32, f16, bf16, i8, i4)";
  case K::Activation: return "an activation (relu, relu6, sigmoid, tanh, gelu, gelu_tanh, silu, identity)";
  case K::LayerName: return "the name of a layer";
  }
  return "?";
}

std::string layerSignature(OpKind kind) {
  std::string out = ir::opKindName(kind);
  const auto &opts = layerSpec(kind).options;
  if (opts.empty()) return out;
  out += "(";
  for (size_t i = 0; i < opts.size(); ++i) {
    if (i) out += ", ";
    out += opts[i].name;
    if (!opts[i].required) out += "=...";
  }
  return out + ")";
}

} // namespace nnc
