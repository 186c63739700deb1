// Elementwise math emitted as LLVM IR on <W x float> vectors (or scalar float):
// exp, tanh, sigmoid and every Activation. Shared by the GEMM epilogue and the
// standalone elementwise kernels so both compute bit-identical activations.
//
// Accuracy (checked by tests/codegen against double-precision references):
//   exp      Cephes expf: range reduction by ln2 (split in two parts), degree-6
//            polynomial, 2^n applied in two halves so denormal results are right;
//            overflow gives +inf, underflow 0, NaN propagates. ~1-2 ulp.
//   tanh     Cephes tanhf: odd polynomial for |x| < 0.625, 1 - 2/(exp(2|x|)+1) above.
//   sigmoid  1/(1+e) or e/(1+e) with e = exp(-|x|); relative error follows exp's,
//            also for denormal results.
//   gelu     (erf form) x Φ(x) with the tail Φ(-|x|) = t exp(-x²/2) G(t), t = 1/(1 +
//            |x|/(2√2)), G a degree-10 polynomial, exp(-x²/2) reduced from an exact
//            split of x² (VectorMath.cpp); relative error < 1e-6 over all x, in vectors.
// Nothing here uses fast-math flags: results do not depend on reassociation.
#pragma once
#include <llvm/IR/IRBuilder.h>

#include <string_view>
#include <vector>

#include "compiler/codegen/KernelSpec.h"

namespace nnc::codegen {

class VectorMath {
public:
  VectorMath(llvm::IRBuilder<>& builder, llvm::Module& module, bool hasFma)
      : b_(builder), module_(module), fma_(hasFma) {}

  // a*b + c: one llvm.fma when the CPU has FMA, else fmul then fadd.
  llvm::Value* mulAdd(llvm::Value* a, llvm::Value* b, llvm::Value* c);
  // The constant `x` in the shape of `like` (vector splat or scalar).
  llvm::Value* constant(float x, llvm::Type* like);

  llvm::Value* exp(llvm::Value* x);
  llvm::Value* tanh(llvm::Value* x);
  llvm::Value* sigmoid(llvm::Value* x);
  llvm::Value* activation(Activation act, llvm::Value* x);

private:
  llvm::Value* polynomial(llvm::Value* x, std::initializer_list<float> highToLow);
  llvm::Value* geluErf(llvm::Value* x);
  llvm::Value* expPolynomial(llvm::Value* r);
  llvm::Value* reduceByLn2(llvm::Value* x, llvm::Value* n);
  // i32 in the shape of `like` (f32 vector or scalar): the type its bits are read as.
  llvm::Type* int32Like(llvm::Type* like);

  llvm::IRBuilder<>& b_;
  llvm::Module& module_;
  bool fma_;
};

// C functions emitted code may call; a JIT defines each name at its address.
struct RuntimeHelper {
  std::string_view name;
  void* address;
};
std::vector<RuntimeHelper> runtimeHelperSymbols();

} // namespace nnc::codegen
