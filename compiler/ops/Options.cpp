#include <fmt/format.h>

#include "compiler/ops/OpTable.h"

namespace nnc::ops {
using K = OptionSpec::Kind;

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

std::string layerSignature(ir::OpKind kind) {
  std::string out = ir::opKindName(kind);
  const auto &opts = opInfo(kind).options;
  if (opts.empty()) return out;
  out += "(";
  for (size_t i = 0; i < opts.size(); ++i) {
    if (i) out += ", ";
    out += opts[i].name;
    if (!opts[i].required) out += "=...";
  }
  return out + ")";
}

std::string optionValueText(const OptionSpec &o, const ir::Op &op) {
  const ir::LayerAttrs &a = op.attrs;
  switch (o.kind) {
  case K::Int: return fmt::format("{}={}", o.name, a.*o.intField);
  case K::Pair: {
    const int64_t h = a.*o.intField, w = a.*o.intField2;
    return h == w ? fmt::format("{}={}", o.name, h) : fmt::format("{}=({}, {})", o.name, h, w);
  }
  case K::Bool: return fmt::format("{}={}", o.name, a.*o.boolField);
  case K::Float: return fmt::format("{}={}", o.name, a.*o.floatField);
  case K::Activation: return fmt::format("{}={}", o.name, ir::opKindName(a.*o.actField));
  case K::LayerName: return (a.*o.nameField).empty() ? "" : fmt::format("{}={}", o.name, a.*o.nameField);
  case K::DType: return ""; // shown with the params
  }
  return "";
}

} // namespace nnc::ops
