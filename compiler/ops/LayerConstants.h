// The constant operands of a weighted layer (dense, conv2d, depthwise): its weights
// (packed for its GEMM, or plain for the depthwise kernel) and its bias, with a
// batchnorm folded in when FuseEpilogues moved one into the layer. Shared by
// DenseOps.cpp and ConvOps.cpp.
#pragma once
#include <optional>
#include <string>
#include <utility>

#include "compiler/lower/LoweringContext.h"

namespace nnc::ops {

// Weights and bias (when `bias`: the layer's, or a folded batchnorm's; else none) from
// the weight tensor `weightName` ([out, …] viewed as [out, cols]), rows
// [rowBegin, rowBegin + rows): a conv group's output channels. Packed for `packFor`
// when given, else plain rows in `plainStorage` (f32, or a rowTableLayout below it).
inline std::pair<lower::Operand, lower::Operand>
layerConstants(lower::LoweringContext &cx, const ir::Op &op, const std::string &weightName, int64_t rows, int64_t cols,
               int64_t rowBegin, bool bias, std::optional<codegen::GemmSpec> packFor,
               DType plainStorage = DType::F32, int64_t kernelTaps = 1, bool transposed = false) {
  using lower::WeightRecipe;
  using Source = WeightRecipe::Source;
  const bool norm = !op.foldedNorm.empty();
  WeightRecipe w;
  w.name = weightName + (norm ? " (batchnorm " + op.foldedNorm + " folded)" : "");
  w.source = norm ? Source::NormFoldedWeight : Source::Tensor;
  w.tensors = norm ? std::vector<std::string>{op.name, op.foldedNorm} : std::vector<std::string>{weightName};
  w.shape = {rows, cols};
  w.rowBegin = rowBegin;
  w.kernelTaps = kernelTaps;
  w.transposed = transposed;
  w.eps = norm ? op.foldedNormEps : 0;
  w.packFor = packFor;
  w.storage = packFor ? packFor->weightType : plainStorage;
  lower::Operand weights = cx.constant(std::move(w));
  if (!bias) return {weights, lower::Operand::none()};
  WeightRecipe b;
  b.name = op.name + ".bias" + (norm ? " (batchnorm " + op.foldedNorm + " folded)" : "");
  b.source = norm ? Source::NormFoldedBias : Source::Tensor;
  b.tensors = norm ? std::vector<std::string>{op.name, op.foldedNorm} : std::vector<std::string>{op.name + ".bias"};
  b.shape = {rows};
  b.rowBegin = rowBegin;
  b.eps = w.eps;
  return {weights, cx.constant(std::move(b))};
}

// B (packed) and bias of a GEMM over rows [rowBegin, rowBegin + spec.N) of the weight
// (a conv's columns in (tap, channel) order when kernelTaps > 1: WeightRecipe).
inline std::pair<lower::Operand, lower::Operand> gemmConstants(lower::LoweringContext &cx, const ir::Op &op,
                                                               const codegen::GemmSpec &spec,
                                                               const std::string &weightName, int64_t rowBegin,
                                                               int64_t kernelTaps = 1) {
  return layerConstants(cx, op, weightName, spec.N, spec.K, rowBegin, spec.bias, spec, DType::F32, kernelTaps);
}

} // namespace nnc::ops
