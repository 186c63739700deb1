// The constant operands of a layer lowered onto the GEMM (dense, conv2d, depthwise):
// its packed weights and its bias, with a batchnorm folded in when FuseEpilogues moved
// one into the layer. Shared by DenseOps.cpp and ConvOps.cpp.
#pragma once
#include <string>
#include <utility>

#include "compiler/lower/LoweringContext.h"

namespace nnc::ops {

// B and bias for `spec` (spec.bias says whether there is one: the layer's bias, or a
// folded batchnorm's) from the weight tensor `weightName` ([out, …] viewed as
// [out, spec.K]), rows [rowBegin, rowBegin + spec.N): a conv group's output channels.
inline std::pair<lower::Operand, lower::Operand> gemmConstants(lower::LoweringContext &cx, const ir::Op &op,
                                                               const codegen::GemmSpec &spec,
                                                               const std::string &weightName, int64_t rowBegin) {
  using lower::WeightRecipe;
  using Source = WeightRecipe::Source;
  const bool norm = !op.foldedNorm.empty();
  WeightRecipe w;
  w.name = weightName + (norm ? " (batchnorm " + op.foldedNorm + " folded)" : "");
  w.source = norm ? Source::NormFoldedWeight : Source::Tensor;
  w.tensors = norm ? std::vector<std::string>{op.name, op.foldedNorm} : std::vector<std::string>{weightName};
  w.shape = {spec.N, spec.K};
  w.rowBegin = rowBegin;
  w.eps = norm ? op.foldedNormEps : 0;
  w.packFor = spec;
  lower::Operand weights = cx.constant(std::move(w));
  if (!spec.bias) return {weights, lower::Operand::none()};
  WeightRecipe b;
  b.name = op.name + ".bias" + (norm ? " (batchnorm " + op.foldedNorm + " folded)" : "");
  b.source = norm ? Source::NormFoldedBias : Source::Tensor;
  b.tensors = norm ? std::vector<std::string>{op.name, op.foldedNorm} : std::vector<std::string>{op.name + ".bias"};
  b.shape = {spec.N};
  b.rowBegin = rowBegin;
  b.eps = w.eps;
  return {weights, cx.constant(std::move(b))};
}

} // namespace nnc::ops
