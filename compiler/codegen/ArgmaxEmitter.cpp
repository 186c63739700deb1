// Argmax per row: W lanes of (running max, its first column), then a fixed-order
// reduction over the lanes, so the result is the row's first maximum whatever W is.
#include "compiler/codegen/ArgmaxEmitter.h"

#include <llvm/IR/IRBuilder.h>

#include <cmath>
#include <limits>
#include <stdexcept>

#include "compiler/codegen/KernelFunction.h"
#include "compiler/codegen/LoopBuilder.h"
#include "compiler/codegen/PartialVector.h"

namespace nnc::codegen {

using llvm::Value;

std::string argmaxFunctionName(const ArgmaxSpec& spec) { return "nnc_" + spec.key(); }

void validateArgmaxSpec(const ArgmaxSpec& s) {
  if (s.rows < 0 || s.cols < 1 || s.cols > kArgmaxMaxCols)
    throw std::invalid_argument("argmax " + s.key() + ": need rows >= 0 and cols in [1, " +
                                std::to_string(kArgmaxMaxCols) + "] (rows " + std::to_string(s.rows) + ", cols " +
                                std::to_string(s.cols) + ")");
}

std::unique_ptr<llvm::Module> emitArgmaxModule(llvm::LLVMContext& ctx, const ArgmaxSpec& spec,
                                               const MicroKernelShape& shape) {
  validateArgmaxSpec(spec);
  auto module = std::make_unique<llvm::Module>(argmaxFunctionName(spec), ctx);
  llvm::Function* fn = createKernelFunction(*module, argmaxFunctionName(spec), {"x", "out"}, {"rowBegin", "rowEnd"});
  auto args = fn->arg_begin();
  Value *x = args++, *out = args++, *rowBegin = args++, *rowEnd = args++;

  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", fn));
  const int W = shape.vectorFloats;
  auto* vecTy = llvm::FixedVectorType::get(b.getFloatTy(), W);
  auto* idxTy = llvm::FixedVectorType::get(b.getInt32Ty(), W);
  // A lane's index before it has seen a value that is not NaN: past every column.
  const int32_t none = std::numeric_limits<int32_t>::max();
  Value* noneVec = b.CreateVectorSplat(W, b.getInt32(none));
  std::vector<llvm::Constant*> laneNumbers;
  for (int l = 0; l < W; ++l) laneNumbers.push_back(b.getInt32(l));
  Value* lanes = llvm::ConstantVector::get(laneNumbers);
  // Loop-carried through allocas (promoted to registers by mem2reg), as NormEmitter.
  llvm::AllocaInst* maxSlot = b.CreateAlloca(vecTy);
  llvm::AllocaInst* idxSlot = b.CreateAlloca(idxTy);
  const int64_t whole = spec.cols / W * W;

  LoopBuilder(b).forRange(rowBegin, rowEnd, 1, "row", [&](Value* r) {
    Value* src = b.CreateGEP(b.getFloatTy(), x, b.CreateMul(r, b.getInt64(spec.cols)));
    b.CreateStore(llvm::ConstantFP::getInfinity(vecTy, /*Negative=*/true), maxSlot);
    b.CreateStore(noneVec, idxSlot);
    // Columns [c, c + n): a lane takes a value above its max (ordered: NaN never is),
    // or its first value that is not NaN (so -inf counts); strictly greater, so a
    // lane keeps its first maximum. The tail's missing lanes load NaN: never taken.
    auto scan = [&](Value* c, int64_t n) {
      Value* v = loadFirstLanes(b, vecTy, b.CreateGEP(b.getFloatTy(), src, c), n,
                                std::numeric_limits<float>::quiet_NaN());
      Value* m = b.CreateLoad(vecTy, maxSlot);
      Value* i = b.CreateLoad(idxTy, idxSlot);
      Value* first = b.CreateAnd(b.CreateICmpEQ(i, noneVec), b.CreateFCmpORD(v, v));
      Value* take = b.CreateOr(b.CreateFCmpOGT(v, m), first);
      Value* cols = b.CreateAdd(b.CreateVectorSplat(W, b.CreateTrunc(c, b.getInt32Ty())), lanes);
      b.CreateStore(b.CreateSelect(take, v, m), maxSlot);
      b.CreateStore(b.CreateSelect(take, cols, i), idxSlot);
    };
    if (whole > 0) LoopBuilder(b).forRange(b.getInt64(0), b.getInt64(whole), W, "col", [&](Value* c) { scan(c, W); });
    if (spec.cols % W) scan(b.getInt64(whole), spec.cols % W);

    // Lanes 0..W-1 in order: a lane with a value wins over none, a larger value, or
    // the same value at a smaller column (the row's first maximum).
    Value* m = b.CreateLoad(vecTy, maxSlot);
    Value* i = b.CreateLoad(idxTy, idxSlot);
    Value* bestV = b.CreateExtractElement(m, uint64_t(0));
    Value* bestI = b.CreateExtractElement(i, uint64_t(0));
    for (int l = 1; l < W; ++l) {
      Value* v = b.CreateExtractElement(m, uint64_t(l));
      Value* c = b.CreateExtractElement(i, uint64_t(l));
      Value* better = b.CreateOr(b.CreateOr(b.CreateICmpEQ(bestI, b.getInt32(none)), b.CreateFCmpOGT(v, bestV)),
                                 b.CreateAnd(b.CreateFCmpOEQ(v, bestV), b.CreateICmpSLT(c, bestI)));
      Value* take = b.CreateAnd(b.CreateICmpNE(c, b.getInt32(none)), better);
      bestV = b.CreateSelect(take, v, bestV);
      bestI = b.CreateSelect(take, c, bestI);
    }
    Value* id = b.CreateSelect(b.CreateICmpEQ(bestI, b.getInt32(none)), b.getInt32(0), bestI);
    b.CreateStore(id, b.CreateGEP(b.getInt32Ty(), out, r));
  }, /*unroll=*/1);
  b.CreateRetVoid();
  return module;
}

} // namespace nnc::codegen
