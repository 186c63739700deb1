// Layernorm and rmsnorm over the last axis. Each row is walked in vectors of the
// CPU's width W, four vectors per loop iteration (one accumulator each, so the adds
// of a pass are four independent chains); whole vectors left over after the groups go
// to the first accumulators and the column tail (cols % W) is one masked load into the
// next one, with the lanes past the row forced to 0. The four accumulators are then
// added as (a0 + a1) + (a2 + a3) and the lanes of that vector halved pairwise
// (lo + hi) down to one: a fixed order that depends only on cols and W, never on the
// row range a thread was given.
//
// layernorm, three passes over the row:
//   1. s = Σ (x - x0), x0 = x[row, 0]          m = s / cols
//   2. q = Σ d²,  d = (x - x0) - m              rstd = 1 / sqrt(q / cols + eps)
//   3. out = d · rstd · gamma (+ beta)
// i.e. the two-pass algorithm (mean, then the variance of x - mean) on data shifted by
// the row's first element. mean = x0 + m exactly in real numbers, so this computes the
// same function as (x - mean) / sqrt(var + eps); the shift only keeps the f32 sums
// small. Without it an f32 mean of 1e4 + N(0, 1) data is off by up to half an ulp of
// 1e4 (5e-4, i.e. 5e-4 of a standard deviation) before any summation error, and every
// output inherits that; with it the error of d is relative to |x - x0|, a few standard
// deviations for any row whose first element is not an extreme outlier.
// rmsnorm, two passes (HF LlamaRMSNorm): q = Σ x², r = 1 / sqrt(q / cols + eps),
// out = (x · r) · gamma.
// sqrt is the correctly rounded llvm.sqrt and 1/· a real division (no rsqrt
// approximation). eps enters as the f32 nearest to spec.eps, as in PyTorch's f32 path.
// A sum of squares beyond f32's range (finite data, |d| or |x| above ~1.8e19) would
// make rstd 0 and every output of the row 0 (+ beta): finite and wrong (PyTorch's f32
// layernorm gives NaN there, its rmsnorm the zeros). Such a row takes the squares again
// scaled by s = max |d| (or |x|): q' = Σ (d / s)², and out = (d · (1/s)) · rstd' with
// rstd' = 1 / sqrt(q' / cols + eps / s²), the same function. Other rows only pay the
// test of q against infinity; their outputs keep their bits (d · 1 = d). An infinite
// input makes s infinite and the whole row NaN.

// out may equal x: passes 1-2 only read, and pass 3 reads each element before it
// writes the same element.
#include "compiler/codegen/NormEmitter.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>

#include <array>
#include <cmath>
#include <functional>
#include <stdexcept>
#include <vector>

#include "compiler/codegen/KernelFunction.h"
#include "compiler/codegen/LoopBuilder.h"
#include "compiler/codegen/PartialVector.h"
#include "compiler/codegen/StoredTable.h"
#include "compiler/codegen/VectorMath.h"

namespace nnc::codegen {

using llvm::Value;

std::string normFunctionName(const NormSpec& spec) { return "nnc_" + spec.key(); }

void validateNormSpec(const NormSpec& s) {
  if (s.rows < 0 || s.cols < 1)
    throw std::invalid_argument("norm: need rows >= 0 and cols >= 1 (got rows " +
                                std::to_string(s.rows) + ", cols " + std::to_string(s.cols) + ")");
  if (!std::isfinite(s.eps) || s.eps < 0)
    throw std::invalid_argument("norm: eps must be finite and >= 0 (got " + std::to_string(s.eps) + ")");
  if (s.paramType == DType::I4 && s.group < 1) throw std::invalid_argument("norm: i4 parameters need group >= 1");
}

namespace {

constexpr int kAccumulators = 4;

class NormBuilder {
public:
  NormBuilder(llvm::Function* fn, const NormSpec& spec, const MicroKernelShape& shape)
      : spec_(spec), W_(shape.vectorFloats),
        b_(llvm::BasicBlock::Create(fn->getContext(), "entry", fn)),
        math_(b_, *fn->getParent(), shape.fma),
        vecTy_(llvm::FixedVectorType::get(b_.getFloatTy(), shape.vectorFloats)) {
    auto arg = fn->arg_begin();
    x_ = arg++; gamma_ = arg++; beta_ = arg++; out_ = arg++; rowBegin_ = arg++; rowEnd_ = arg++;
    for (auto& slot : acc_) slot = b_.CreateAlloca(vecTy_);
  }

  void emit() {
    LoopBuilder(b_).forRange(rowBegin_, rowEnd_, 1, "row", [&](Value* r) {
      Value* base = b_.CreateMul(r, b_.getInt64(spec_.cols), "rowbase");
      if (spec_.kind == NormSpec::LayerNorm) emitLayerNormRow(base);
      else emitRmsNormRow(base);
    }, /*unroll=*/1);
    b_.CreateRetVoid();
  }

private:
  // Calls chunk(offset, lanes, accumulator) for every vector of the row: a loop over
  // groups of kAccumulators whole vectors (vector k of a group uses accumulator k),
  // then the whole vectors left (accumulators 0, 1, ...), then the tail (the next one).
  void forEachVector(const std::function<void(Value*, int64_t, int)>& chunk) {
    const int64_t whole = spec_.cols / W_;
    const int64_t group = int64_t(kAccumulators) * W_;
    const int64_t grouped = whole / kAccumulators * group; // columns covered by groups
    if (grouped > 0)
      LoopBuilder(b_).forRange(b_.getInt64(0), b_.getInt64(grouped), group, "col", [&](Value* c) {
        for (int k = 0; k < kAccumulators; ++k) chunk(b_.CreateAdd(c, b_.getInt64(k * W_)), W_, k);
      }, /*unroll=*/1);
    int k = 0;
    for (int64_t c = grouped; c < whole * W_; c += W_) chunk(b_.getInt64(c), W_, k++);
    if (spec_.cols % W_) chunk(b_.getInt64(whole * W_), spec_.cols % W_, k);
  }

  Value* at(Value* ptr, Value* base, Value* offset) {
    return b_.CreateGEP(b_.getFloatTy(), ptr, b_.CreateAdd(base, offset));
  }
  Value* load(Value* ptr, int64_t lanes) { return loadFirstLanes(b_, vecTy_, ptr, lanes, 0.0f); }
  // gamma or beta from column c, widened when stored below f32 (StoredTable.h).
  Value* param(Value* ptr, Value* c, int64_t lanes) {
    if (spec_.paramType == DType::F32) return load(at(ptr, b_.getInt64(0), c), lanes);
    return loadStoredRow(b_, rowTableLayout(1, spec_.cols, spec_.paramType, spec_.group), ptr, b_.getInt64(0), c,
                         lanes, W_);
  }
  // v with the lanes at and past `lanes` set to 0 (for sums over a partial vector).
  Value* zeroPast(Value* v, int64_t lanes) {
    if (lanes >= W_) return v;
    std::vector<llvm::Constant*> bits;
    for (int l = 0; l < W_; ++l) bits.push_back(b_.getInt1(l < lanes));
    return b_.CreateSelect(llvm::ConstantVector::get(bits), v, llvm::Constant::getNullValue(vecTy_));
  }

  void clearAccumulators() {
    for (auto* slot : acc_) b_.CreateStore(llvm::Constant::getNullValue(vecTy_), slot);
  }
  void accumulate(int k, Value* v) {
    b_.CreateStore(b_.CreateFAdd(b_.CreateLoad(vecTy_, acc_[k]), v), acc_[k]);
  }
  void accumulateSquare(int k, Value* v) {
    b_.CreateStore(math_.mulAdd(v, v, b_.CreateLoad(vecTy_, acc_[k])), acc_[k]);
  }
  void accumulateMagnitude(int k, Value* v) { // max |v|, NaN and ∞ kept (maximum)
    Value* a = b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, v);
    b_.CreateStore(b_.CreateBinaryIntrinsic(llvm::Intrinsic::maximum, b_.CreateLoad(vecTy_, acc_[k]), a), acc_[k]);
  }
  // (a0 + a1) + (a2 + a3), then the lanes pairwise: lo half + hi half until one is left
  // (with `combine`: the same order with it instead of +).
  Value* reduceAccumulators(const std::function<Value*(Value*, Value*)>& combine = nullptr) {
    static_assert(kAccumulators == 4);
    auto op = [&](Value* x, Value* y) { return combine ? combine(x, y) : b_.CreateFAdd(x, y); };
    Value* a[kAccumulators];
    for (int k = 0; k < kAccumulators; ++k) a[k] = b_.CreateLoad(vecTy_, acc_[k]);
    Value* v = op(op(a[0], a[1]), op(a[2], a[3]));
    for (int width = W_; width > 1; width /= 2) {
      std::vector<int> lo, hi;
      for (int l = 0; l < width / 2; ++l) lo.push_back(l), hi.push_back(width / 2 + l);
      v = op(b_.CreateShuffleVector(v, lo), b_.CreateShuffleVector(v, hi));
    }
    return b_.CreateExtractElement(v, uint64_t(0));
  }

  // rstd (or r) from the sum of squares q of the row's values value(c, lanes), and the
  // factor the outputs scale those values by first: 1, or where q overflowed, 1/s (see
  // the top of the file); both splat.
  std::pair<Value*, Value*> inverseRootAndScale(Value* q, const std::function<Value*(Value*, int64_t)>& value) {
    llvm::Function* fn = b_.GetInsertBlock()->getParent();
    llvm::BasicBlock* from = b_.GetInsertBlock();
    auto* rescue = llvm::BasicBlock::Create(b_.getContext(), "overflow", fn);
    auto* join = llvm::BasicBlock::Create(b_.getContext(), "rstd", fn);
    Value* plain = inverseRoot(q);
    b_.CreateCondBr(b_.CreateFCmpOEQ(q, llvm::ConstantFP::getInfinity(b_.getFloatTy())), rescue, join);

    b_.SetInsertPoint(rescue);
    clearAccumulators();
    forEachVector([&](Value* c, int64_t lanes, int k) { accumulateMagnitude(k, zeroPast(value(c, lanes), lanes)); });
    Value* s = reduceAccumulators([&](Value* x, Value* y) { return b_.CreateBinaryIntrinsic(llvm::Intrinsic::maximum, x, y); });
    Value* inv = b_.CreateFDiv(f32(1.0), s);
    Value* invSplat = b_.CreateVectorSplat(W_, inv);
    clearAccumulators();
    forEachVector([&](Value* c, int64_t lanes, int k) {
      accumulateSquare(k, zeroPast(b_.CreateFMul(value(c, lanes), invSplat), lanes));
    });
    Value* var = b_.CreateFAdd(b_.CreateFDiv(reduceAccumulators(), f32(double(spec_.cols))),
                               b_.CreateFMul(b_.CreateFMul(f32(spec_.eps), inv), inv));
    Value* scaled = b_.CreateFDiv(f32(1.0), b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, var));
    llvm::BasicBlock* rescued = b_.GetInsertBlock();
    b_.CreateBr(join);

    b_.SetInsertPoint(join);
    llvm::PHINode* rstd = b_.CreatePHI(b_.getFloatTy(), 2);
    rstd->addIncoming(plain, from);
    rstd->addIncoming(scaled, rescued);
    llvm::PHINode* scale = b_.CreatePHI(b_.getFloatTy(), 2);
    scale->addIncoming(f32(1.0), from);
    scale->addIncoming(inv, rescued);
    return {b_.CreateVectorSplat(W_, rstd), b_.CreateVectorSplat(W_, scale)};
  }

  Value* f32(double v) { return llvm::ConstantFP::get(b_.getFloatTy(), float(v)); }
  // 1 / sqrt(sumOfSquares / cols + eps), with a correctly rounded sqrt and division.
  Value* inverseRoot(Value* sumOfSquares) {
    Value* var = b_.CreateFDiv(sumOfSquares, f32(double(spec_.cols)));
    Value* root = b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, b_.CreateFAdd(var, f32(spec_.eps)));
    return b_.CreateFDiv(f32(1.0), root);
  }

  void emitLayerNormRow(Value* base) {
    Value* x0 = b_.CreateVectorSplat(W_, b_.CreateLoad(b_.getFloatTy(), at(x_, base, b_.getInt64(0))));
    clearAccumulators();
    forEachVector([&](Value* c, int64_t lanes, int k) {
      accumulate(k, zeroPast(b_.CreateFSub(load(at(x_, base, c), lanes), x0), lanes));
    });
    Value* m = b_.CreateVectorSplat(W_, b_.CreateFDiv(reduceAccumulators(), f32(double(spec_.cols))));
    auto centred = [&](Value* c, int64_t lanes) {
      return b_.CreateFSub(b_.CreateFSub(load(at(x_, base, c), lanes), x0), m);
    };
    clearAccumulators();
    forEachVector([&](Value* c, int64_t lanes, int k) {
      accumulateSquare(k, zeroPast(centred(c, lanes), lanes));
    });
    auto [rstd, scale] = inverseRootAndScale(reduceAccumulators(), centred);
    forEachVector([&](Value* c, int64_t lanes, int) {
      Value* y = b_.CreateFMul(b_.CreateFMul(centred(c, lanes), scale), rstd);
      Value* g = param(gamma_, c, lanes);
      Value* v = spec_.shift ? math_.mulAdd(y, g, param(beta_, c, lanes))
                             : b_.CreateFMul(y, g);
      storeFirstLanes(b_, v, at(out_, base, c), lanes);
    });
  }

  void emitRmsNormRow(Value* base) {
    clearAccumulators();
    forEachVector([&](Value* c, int64_t lanes, int k) {
      accumulateSquare(k, load(at(x_, base, c), lanes)); // masked lanes load as 0
    });
    auto [r, scale] = inverseRootAndScale(reduceAccumulators(),
                                          [&](Value* c, int64_t lanes) { return load(at(x_, base, c), lanes); });
    forEachVector([&](Value* c, int64_t lanes, int) {
      Value* v = b_.CreateFMul(b_.CreateFMul(b_.CreateFMul(load(at(x_, base, c), lanes), scale), r),
                               param(gamma_, c, lanes));
      storeFirstLanes(b_, v, at(out_, base, c), lanes);
    });
  }

  const NormSpec& spec_;
  int W_;
  llvm::IRBuilder<> b_;
  VectorMath math_;
  llvm::FixedVectorType* vecTy_;
  std::array<llvm::AllocaInst*, kAccumulators> acc_{};
  Value *x_, *gamma_, *beta_, *out_, *rowBegin_, *rowEnd_;
};

} // namespace

std::unique_ptr<llvm::Module> emitNormModule(llvm::LLVMContext& ctx, const NormSpec& spec,
                                             const MicroKernelShape& shape) {
  validateNormSpec(spec);
  auto module = std::make_unique<llvm::Module>(normFunctionName(spec), ctx);
  llvm::Function* fn = createKernelFunction(*module, normFunctionName(spec),
                                            {"x", "gamma", "beta", "out"}, {"rowBegin", "rowEnd"});
  NormBuilder(fn, spec, shape).emit();
  return module;
}

} // namespace nnc::codegen
