#include "compiler/ops/ShapeContext.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "compiler/support/CheckedMath.h"

namespace nnc::ops {

std::string perExampleDims(const std::vector<int64_t> &shape) {
  std::vector<int64_t> tail(shape.begin() + std::min<size_t>(1, shape.size()), shape.end());
  return fmt::format("[{}]", fmt::join(tail, ", "));
}

std::string ShapeContext::producer(ir::ValueId v) const {
  const ir::Op &p = g_.op(v);
  if (p.kind == ir::OpKind::Input) return fmt::format("the model input '{}' (line {})", p.name, p.loc.begin.line);
  if (p.kind == ir::OpKind::Add) return fmt::format("the residual sum (line {})", p.loc.begin.line);
  return fmt::format("the output of layer '{}' ({}, line {})", p.name, ir::opKindName(p.kind), p.loc.begin.line);
}

SourceRange ShapeContext::at(const ir::Op &op, const char *option) const {
  auto it = op.argLocs.find(option);
  return it != op.argLocs.end() ? it->second : op.loc;
}

bool ShapeContext::fail(SourceRange r, std::string msg) {
  d_.error(r, std::move(msg));
  return false;
}

void ShapeContext::param(ir::Op &op, const std::string &suffix, std::vector<int64_t> shape,
                         ir::ParamTensor::Role role, ir::ParamTensor::Init init) {
  ir::ParamTensor t;
  t.name = op.name + "." + suffix;
  t.shape = std::move(shape);
  t.role = role;
  t.init = init;
  t.count(); // overflow check
  for (size_t i = 1; i < t.shape.size(); ++i) t.fanIn = mulChecked(t.fanIn, t.shape[i]);
  if (role == ir::ParamTensor::Role::Bias && t.name.size() >= 4) {
    const std::string weightName = t.name.substr(0, t.name.size() - 4) + "weight"; // "q.bias" → "q.weight"
    for (const auto &q : op.params)
      if (q.name == weightName) t.fanIn = q.fanIn;
  }
  op.params.push_back(std::move(t));
}

bool ShapeContext::requireFloat(const ir::Op &op) {
  const ir::TensorType &t = in(op);
  if (t.dtype == DType::F32) return true;
  return fail(op.loc, fmt::format("{} expects f32 data, but receives {} token ids: {} "
                                  "(an embedding turns token ids into vectors)",
                                  ir::opKindName(op.kind), dtypeName(t.dtype), producer(op.inputs[0])));
}

bool ShapeContext::requireRank(const ir::Op &op, size_t rank, const char *what) {
  const ir::TensorType &t = in(op);
  if (t.shape.size() == rank + 1) return true;
  return fail(op.loc, fmt::format("{} expects {} per example, but receives {} of shape {}: {}", ir::opKindName(op.kind),
                                  what, t.shape.size() - 1 == 1 ? "a vector" : "a tensor", perExampleDims(t.shape),
                                  producer(op.inputs[0])));
}

std::optional<int64_t> ShapeContext::spatial(const ir::Op &op, const char *axis, int64_t h, int64_t k, int64_t s,
                                             int64_t p) {
  const int64_t padded = addChecked(h, mulChecked(2, p));
  if (padded < k) {
    fail(at(op, "kernel"), fmt::format("{} kernel {} is larger than the padded {} {} (= {} + 2 × {}): the output "
                                       "would be empty",
                                       ir::opKindName(op.kind), k, axis, padded, h, p));
    return std::nullopt;
  }
  return (padded - k) / s + 1;
}

} // namespace nnc::ops
