// Small helpers the rule files share.
#pragma once
#include <string>

#include "compiler/codegen/GemmEmitter.h"
#include "compiler/codegen/KernelSpec.h"
#include "compiler/ir/Ir.h"
#include "compiler/lower/KernelProgram.h"
#include "compiler/support/CheckedMath.h"
#include "compiler/support/Diagnostics.h"

namespace nnc::ops {

inline std::string n(int64_t v) { return withCommas(v); }

// Elements per example (all axes but the batch).
inline int64_t perExample(const ir::TensorType &t) {
  int64_t e = 1;
  for (size_t i = 1; i < t.shape.size(); ++i) e = mulChecked(e, t.shape[i]);
  return e;
}
// Product of the axes between the batch and the last, per example ("rows" of a dense layer).
inline int64_t rowsPerExample(const ir::TensorType &t) {
  int64_t e = 1;
  for (size_t i = 1; i + 1 < t.shape.size(); ++i) e = mulChecked(e, t.shape[i]);
  return e;
}
// rows × cols of a tensor seen as rows of its last axis, batch included.
inline std::pair<int64_t, int64_t> rowsCols(const ir::TensorType &t) {
  const int64_t cols = t.shape.back();
  return {t.elements() / cols, cols};
}

// The GEMM stores the layer's weights in its dtype (op.weightDType; i4 with the
// program's scale group), and takes low-precision activations when the program's mode
// is that dtype: every GEMM-backed layer calls this on its spec.
// rowsAsStored: the GEMM's W rows are the stored tensor's rows (not a conv's reordered
// taps), so with quant.weightsInPlace an f32 GEMM the emitter supports reads them in place.
// Called after the spec's shape and kind (gated) are set.
inline void storeWeightsAsLayer(const lower::Quantisation &quant, const ir::Op &op, codegen::GemmSpec &spec,
                                bool rowsAsStored = true) {
  spec.weightType = op.weightDType;
  spec.quantGroup = op.weightDType == DType::I4 ? quant.group : 0;
  spec.activationType = activationsMultiply(quant.activations, op.weightDType) ? quant.activations : DType::F32;
  spec.weightRows = quant.weightsInPlace && rowsAsStored && codegen::weightRowsSupported(spec);
}

// The kernels' activation for an activation op kind (None for anything else).
inline codegen::Activation activationOf(ir::OpKind k) {
  switch (k) {
  case ir::OpKind::Relu: return codegen::Activation::Relu;
  case ir::OpKind::Relu6: return codegen::Activation::Relu6;
  case ir::OpKind::Sigmoid: return codegen::Activation::Sigmoid;
  case ir::OpKind::Tanh: return codegen::Activation::Tanh;
  case ir::OpKind::Gelu: return codegen::Activation::Gelu;
  case ir::OpKind::GeluTanh: return codegen::Activation::GeluTanh;
  case ir::OpKind::Silu: return codegen::Activation::Silu;
  default: return codegen::Activation::None;
  }
}

} // namespace nnc::ops
