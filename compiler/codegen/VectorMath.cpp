// Vector transcendental functions as IR. Constants are Cephes' single-precision
// ones (expf, tanhf) and a fit of our own (GELU's erfc); see VectorMath.h for the accuracy each one guarantees.
#include "compiler/codegen/VectorMath.h"

#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>


namespace nnc::codegen {

using llvm::Value;

std::vector<RuntimeHelper> runtimeHelperSymbols() {
  return {}; // every function is emitted inline now (GELU's erf was the last helper)
}

Value* VectorMath::constant(float x, llvm::Type* like) {
  return llvm::ConstantFP::get(like, x); // splats for vector types
}

Value* VectorMath::mulAdd(Value* a, Value* b, Value* c) {
  if (fma_) return b_.CreateIntrinsic(llvm::Intrinsic::fma, {a->getType()}, {a, b, c});
  return b_.CreateFAdd(b_.CreateFMul(a, b), c);
}

Value* VectorMath::polynomial(Value* x, std::initializer_list<float> highToLow) {
  auto it = highToLow.begin();
  Value* acc = constant(*it++, x->getType());
  for (; it != highToLow.end(); ++it) acc = mulAdd(acc, x, constant(*it, x->getType()));
  return acc;
}

llvm::Type* VectorMath::int32Like(llvm::Type* like) {
  if (!like->isVectorTy()) return b_.getInt32Ty();
  return llvm::VectorType::get(b_.getInt32Ty(), llvm::cast<llvm::VectorType>(like)->getElementCount());
}

// exp(r) for |r| <= ln2/2 (a little beyond is fine): Cephes' degree-6 polynomial.
Value* VectorMath::expPolynomial(Value* r) {
  Value* p = polynomial(r, {1.9875691500E-4f, 1.3981999507E-3f, 8.3334519073E-3f,
                            4.1665795894E-2f, 1.6666665459E-1f, 5.0000001201E-1f});
  return b_.CreateFAdd(mulAdd(p, b_.CreateFMul(r, r), r), constant(1.0f, r->getType()));
}

// x - n ln2 with ln2 = C1 + C2: n*C1 is exact (C1 has 9 significant bits) and so is
// the subtraction (Cody and Waite), leaving only n*C2's rounding.
Value* VectorMath::reduceByLn2(Value* x, Value* n) {
  llvm::Type* ty = x->getType();
  Value* r = b_.CreateFSub(x, b_.CreateFMul(n, constant(0.693359375f, ty)));
  return b_.CreateFSub(r, b_.CreateFMul(n, constant(-2.12194440e-4f, ty)));
}

Value* VectorMath::exp(Value* x) {
  llvm::Type* ty = x->getType();
  llvm::Type* intTy = int32Like(ty);
  auto c = [&](float v) { return constant(v, ty); };
  // Clamp so 2^n stays within two normal halves; compares are false for NaN, so NaN
  // passes through unchanged and is restored at the end.
  Value* xc = b_.CreateSelect(b_.CreateFCmpOGT(x, c(89.0f)), c(89.0f), x);
  xc = b_.CreateSelect(b_.CreateFCmpOLT(xc, c(-104.0f)), c(-104.0f), xc);
  // n = round(x / ln2) by the 1.5*2^23 trick (exact for |n| < 2^22).
  Value* shifted = b_.CreateFAdd(b_.CreateFMul(xc, c(1.44269504088896341f)), c(12582912.0f));
  Value* n = b_.CreateFSub(shifted, c(12582912.0f));
  Value* p = expPolynomial(reduceByLn2(xc, n));
  // 2^n = 2^n1 * 2^n2 with n1 = n >> 1: each half is a normal float for n in [-150, 128].
  Value* ni = b_.CreateFPToSI(n, intTy);
  Value* n1 = b_.CreateAShr(ni, llvm::ConstantInt::get(intTy, 1));
  Value* n2 = b_.CreateSub(ni, n1);
  auto pow2 = [&](Value* e) {
    Value* bits = b_.CreateShl(b_.CreateAdd(e, llvm::ConstantInt::get(intTy, 127)),
                               llvm::ConstantInt::get(intTy, 23));
    return b_.CreateBitCast(bits, ty);
  };
  Value* result = b_.CreateFMul(b_.CreateFMul(p, pow2(n1)), pow2(n2));
  return b_.CreateSelect(b_.CreateFCmpUNO(x, x), x, result);
}

Value* VectorMath::tanh(Value* x) {
  llvm::Type* ty = x->getType();
  auto c = [&](float v) { return constant(v, ty); };
  Value* ax = b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
  // |x| >= 0.625: 1 - 2 / (exp(2|x|) + 1), sign restored (exp overflow gives 1).
  Value* e = exp(b_.CreateFAdd(ax, ax));
  Value* large = b_.CreateFSub(c(1.0f), b_.CreateFDiv(c(2.0f), b_.CreateFAdd(e, c(1.0f))));
  large = b_.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, large, x);
  // |x| < 0.625: x + x^3 P(x^2).
  Value* z = b_.CreateFMul(x, x);
  Value* p = polynomial(z, {-5.70498872745E-3f, 2.06390887954E-2f, -5.37397155531E-2f,
                            1.33314422036E-1f, -3.33332819422E-1f});
  Value* small = mulAdd(b_.CreateFMul(p, z), x, x);
  return b_.CreateSelect(b_.CreateFCmpOGE(ax, c(0.625f)), large, small);
}

Value* VectorMath::sigmoid(Value* x) {
  // e = exp(-|x|) never overflows: 1/(1+e) for x >= 0, e/(1+e) for x < 0, so results
  // down to denormals keep their relative accuracy (1/(1+exp(-x)) would give 0).
  llvm::Type* ty = x->getType();
  Value* e = exp(b_.CreateFNeg(b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x)));
  Value* t = b_.CreateFDiv(constant(1.0f, ty), b_.CreateFAdd(constant(1.0f, ty), e));
  return b_.CreateSelect(b_.CreateFCmpOLT(x, constant(0.0f, ty)), b_.CreateFMul(e, t), t);
}

Value* VectorMath::geluErf(Value* x) {
  // GELU(x) = x Φ(x). With a = |x| and Q = 1 - Φ(a) = erfc(a/√2)/2 (the upper tail),
  // Φ(x) = Q for x < 0 and 1 - Q for x >= 0, so only Q needs relative accuracy.
  //   Q(a) = t · exp(-a²/2) · G(t),  t = 1 / (1 + a / (2√2))
  // (Numerical Recipes' erfc form); G is smooth on t in [0.124, 1] (a in [0, 20]) and is
  // a degree-10 least-squares fit for relative error (5e-9 in exact arithmetic, 1.3e-7
  // evaluated in f32). a is clamped to 14.5: Q(14.5) < 1e-47 rounds to 0, as does every
  // Q beyond, so GELU(x <= -14.5) is -0; NaN passes.
  //
  // exp(-a²/2) must not see a²'s rounding (at a = 13, a rounding of a² alone is a 1e-5
  // relative error): a = ah + al with ah holding a's top 12 bits, so h = -ah²/2 is
  // exact and l = -(2 ah al + al²)/2 is small (|l| <= 0.09). n = round((h + l) / ln2)
  // and r = (h - n ln2) + l, with h - n ln2 as exact as in exp (Cody and Waite), keep
  // |r| within ln2/2 plus a rounding, where exp's polynomial holds. (exp(-hi/2) times
  // a Taylor polynomial for exp(-lo/2), each 2^n in two halves, took 3.5 ms instead of
  // 2.8 over 4M values at 1 thread, Zen 4; PyTorch's erf GELU 2.6 ms, less accurate in
  // the tail.)
  //
  // 2^n, n in [-152, 0], is applied as 2^(n+30) (normal) and then 2^-30, so Q's one
  // rounding into the subnormal range comes last. n is read from the bits of the
  // shifted sum (the 1.5*2^23 trick) rather than converted, so a NaN x only ever
  // meets float arithmetic and comes out as NaN.
  llvm::Type* ty = x->getType();
  llvm::Type* intTy = int32Like(ty);
  auto c = [&](float v) { return constant(v, ty); };
  auto i = [&](uint32_t v) { return llvm::ConstantInt::get(intTy, v); };
  Value* a = b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
  a = b_.CreateSelect(b_.CreateFCmpOGT(a, c(14.5f)), c(14.5f), a);
  Value* ah = b_.CreateBitCast(b_.CreateAnd(b_.CreateBitCast(a, intTy), i(0xFFFFF000u)), ty);
  Value* al = b_.CreateFSub(a, ah);
  Value* h = b_.CreateFMul(b_.CreateFMul(ah, ah), c(-0.5f));
  Value* l = b_.CreateFMul(mulAdd(b_.CreateFAdd(ah, ah), al, b_.CreateFMul(al, al)), c(-0.5f));
  Value* shifted = mulAdd(b_.CreateFAdd(h, l), c(1.44269504088896341f), c(12582912.0f));
  Value* n = b_.CreateFSub(shifted, c(12582912.0f));
  Value* e = expPolynomial(b_.CreateFAdd(reduceByLn2(h, n), l));
  // bits(shifted) = bits(1.5*2^23) + n; 2^(n+30) has the exponent field n + 30 + 127.
  Value* scaleBits = b_.CreateShl(b_.CreateAdd(b_.CreateBitCast(shifted, intTy), i(30 + 127 - 0x4B400000u)), i(23));
  e = b_.CreateFMul(e, b_.CreateBitCast(scaleBits, ty));
  Value* t = b_.CreateFDiv(c(1.0f), mulAdd(a, c(0.35355339059327373f), c(1.0f)));
  Value* g = polynomial(t, {2.066705748e-02f, -1.117239743e-01f, 2.319721580e-01f,
                            -2.051258385e-01f, 4.496085271e-02f, -1.656694710e-02f,
                            4.144189507e-02f, 8.904079348e-02f, 1.232210249e-01f,
                            1.410662979e-01f, 1.410466880e-01f});
  Value* q = b_.CreateFMul(b_.CreateFMul(b_.CreateFMul(t, g), e), c(0x1p-30f));
  Value* phi = b_.CreateSelect(b_.CreateFCmpOLT(x, c(0.0f)), q, b_.CreateFSub(c(1.0f), q));
  return b_.CreateFMul(x, phi);
}

Value* VectorMath::activation(Activation act, Value* x) {
  llvm::Type* ty = x->getType();
  auto c = [&](float v) { return constant(v, ty); };
  switch (act) {
  case Activation::None: return x;
  case Activation::Relu: // select keeps NaN (compare is false), like torch.relu
    return b_.CreateSelect(b_.CreateFCmpOLT(x, c(0.0f)), c(0.0f), x);
  case Activation::Relu6: {
    Value* lo = b_.CreateSelect(b_.CreateFCmpOLT(x, c(0.0f)), c(0.0f), x);
    return b_.CreateSelect(b_.CreateFCmpOGT(lo, c(6.0f)), c(6.0f), lo);
  }
  case Activation::Sigmoid: return sigmoid(x);
  case Activation::Tanh: return tanh(x);
  case Activation::Gelu: return geluErf(x);
  case Activation::GeluTanh: { // PyTorch's formula: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    Value* x3 = b_.CreateFMul(b_.CreateFMul(x, x), x);
    Value* inner = b_.CreateFMul(c(0.7978845608028654f), mulAdd(x3, c(0.044715f), x));
    Value* t = b_.CreateFAdd(c(1.0f), tanh(inner));
    return b_.CreateFMul(b_.CreateFMul(c(0.5f), x), t);
  }
  case Activation::Silu: return b_.CreateFMul(x, sigmoid(x));
  }
  return x;
}

} // namespace nnc::codegen
