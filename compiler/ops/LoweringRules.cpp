// The lowering rule of every op kind that runs: IR op → steps of the kernel program
// (KernelProgram.h), with their kernels, operands, scratch and weight recipes. The
// lowering driver (compiler/lower/Lower.cpp) calls them in op order; views get no
// rule (their output is their input's storage).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "compiler/lower/LoweringContext.h"
#include "compiler/ops/LoweringRulesImpl.h"

namespace nnc::ops::lowering {
using codegen::Activation;
using lower::Operand;
using lower::WeightRecipe;

namespace {
Activation activationOf(ir::OpKind k) {
  switch (k) {
  case ir::OpKind::Relu: return Activation::Relu;
  case ir::OpKind::Relu6: return Activation::Relu6;
  case ir::OpKind::Sigmoid: return Activation::Sigmoid;
  case ir::OpKind::Tanh: return Activation::Tanh;
  case ir::OpKind::Gelu: return Activation::Gelu;
  case ir::OpKind::GeluTanh: return Activation::GeluTanh;
  case ir::OpKind::Silu: return Activation::Silu;
  default: return Activation::None;
  }
}
// rows × cols of a tensor seen as rows of its last axis (batch included).
std::pair<int64_t, int64_t> rowsCols(const ir::TensorType &t) {
  const int64_t cols = t.shape.back();
  return {t.elements() / cols, cols};
}
} // namespace

// C = act(A · Wᵀ + b) + residual, one GEMM over all rows (batch and leading axes).
// A folded chain (FoldLinearChains) reads its layers' tensors and multiplies them out
// at load; a tied dense reads the embedding's table.
void dense(lower::LoweringContext &cx, const ir::Op &op) {
  if (op.weightDType != DType::F32) {
    cx.notRunnable(op,
                   fmt::format("stores its weights as {}: nnc runs f32 weights only for now (reports cover every dtype)",
                               dtypeName(op.weightDType)),
                   lower::Step::Blocker::StorageDType);
    return;
  }
  codegen::GemmSpec spec;
  spec.K = op.attrs.in;
  spec.N = op.attrs.out;
  spec.M = cx.typeOf(op.inputs[0]).elements() / spec.K;
  spec.bias = op.attrs.bias;
  spec.act = activationOf(op.epilogue);
  spec.residual = op.residualInput >= 0;
  spec.weightType = DType::F32;
  WeightRecipe w;
  w.shape = {spec.N, spec.K};
  w.packFor = spec;
  const bool folded = !op.foldedFrom.empty();
  if (folded) {
    w.name = op.name + ".weight (folded: " + fmt::format("{}", fmt::join(op.foldedFrom, " · ")) + ")";
    w.source = WeightRecipe::Source::FoldedWeight;
    w.tensors = op.foldedFrom;
  } else {
    w.name = (op.attrs.tie.empty() ? op.name : op.attrs.tie) + ".weight";
    w.tensors = {w.name};
  }
  Operand weights = cx.constant(std::move(w));
  Operand bias = Operand::none();
  if (spec.bias && folded)
    bias = cx.constant(
        WeightRecipe{op.name + ".bias (folded)", WeightRecipe::Source::FoldedBias, op.foldedFrom, {spec.N}});
  else if (spec.bias)
    bias = cx.tensor(op.name + ".bias", {spec.N});
  Operand residual = spec.residual ? Operand::buffer(cx.bufferOf(op.residualInput)) : Operand::none();
  cx.step(op, spec, {cx.in(op), weights, bias, residual, cx.out(op)});
}

void activation(lower::LoweringContext &cx, const ir::Op &op) {
  auto [rows, cols] = rowsCols(op.type);
  cx.step(op, codegen::ElementwiseSpec{codegen::ElementwiseSpec::Activation, activationOf(op.kind), rows, cols},
          {cx.in(op), Operand::none(), cx.out(op)});
}

void softmax(lower::LoweringContext &cx, const ir::Op &op) {
  auto [rows, cols] = rowsCols(op.type);
  cx.step(op, codegen::ElementwiseSpec{codegen::ElementwiseSpec::Softmax, Activation::None, rows, cols},
          {cx.in(op), Operand::none(), cx.out(op)});
}

void add(lower::LoweringContext &cx, const ir::Op &op) {
  auto [rows, cols] = rowsCols(op.type);
  cx.step(op, codegen::ElementwiseSpec{codegen::ElementwiseSpec::Add, Activation::None, rows, cols},
          {cx.in(op, 0), cx.in(op, 1), cx.out(op)});
}

// layernorm / rmsnorm over the last axis; scale (and layernorm's shift) from the file.
void norm(lower::LoweringContext &cx, const ir::Op &op) {
  auto [rows, cols] = rowsCols(op.type);
  codegen::NormSpec spec;
  spec.kind = op.kind == ir::OpKind::RmsNorm ? codegen::NormSpec::RmsNorm : codegen::NormSpec::LayerNorm;
  spec.rows = rows;
  spec.cols = cols;
  spec.eps = op.attrs.eps;
  spec.shift = op.kind == ir::OpKind::LayerNorm && op.attrs.bias;
  Operand gamma = cx.tensor(op.name + ".weight", {cols});
  Operand beta = spec.shift ? cx.tensor(op.name + ".bias", {cols}) : Operand::none();
  cx.step(op, spec, {cx.in(op), gamma, beta, cx.out(op)});
}

// maxpool / avgpool over each (batch, channel) plane of the NCHW activation.
void pool(lower::LoweringContext &cx, const ir::Op &op) {
  const ir::TensorType &in = cx.typeOf(op.inputs[0]);
  const ir::LayerAttrs &a = op.attrs;
  codegen::PoolSpec spec;
  spec.kind = op.kind == ir::OpKind::MaxPool ? codegen::PoolSpec::Max : codegen::PoolSpec::Avg;
  spec.planes = in.shape[0] * in.shape[1];
  spec.h = in.shape[2];
  spec.w = in.shape[3];
  spec.kh = a.kh, spec.kw = a.kw, spec.sh = a.sh, spec.sw = a.sw, spec.ph = a.ph, spec.pw = a.pw;
  cx.step(op, spec, {cx.in(op), cx.out(op)});
}

void notYet(lower::LoweringContext &cx, const ir::Op &op) {
  cx.notRunnable(op, fmt::format("cannot run: nnc has no kernels for {} layers yet (reports cover them)",
                                 ir::opKindName(op.kind)));
}

} // namespace nnc::ops::lowering
