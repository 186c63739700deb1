// Rotary embedding: per row, its position's table row; per head, the two halves are
// loaded a vector at a time, rotated with two multiply-adds each, and stored back.
#include "compiler/codegen/RopeEmitter.h"

#include <llvm/IR/IRBuilder.h>

#include <stdexcept>

#include "compiler/codegen/KernelFunction.h"
#include "compiler/codegen/LoopBuilder.h"
#include "compiler/codegen/PartialVector.h"
#include "compiler/codegen/VectorMath.h"

namespace nnc::codegen {

using llvm::Value;

std::string ropeFunctionName(const RopeSpec& spec) { return "nnc_" + spec.key(); }

void validateRopeSpec(const RopeSpec& s) {
  if (s.rows < 0 || s.seq < 1 || s.heads < 1 || s.headDim < 2 || s.headDim % 2 != 0 || s.heads * s.headDim > s.ld)
    throw std::invalid_argument("rope " + s.key() + ": need rows >= 0, seq >= 1, heads >= 1, an even head size >= 2 "
                                "and heads·headDim <= ld (rows " + std::to_string(s.rows) + ")");
}

std::unique_ptr<llvm::Module> emitRopeModule(llvm::LLVMContext& ctx, const RopeSpec& spec,
                                             const MicroKernelShape& shape) {
  validateRopeSpec(spec);
  auto module = std::make_unique<llvm::Module>(ropeFunctionName(spec), ctx);
  llvm::Function* fn = createKernelFunction(*module, ropeFunctionName(spec),
                                            {"x", "table"}, {"rowBegin", "rowEnd", "past"});
  auto args = fn->arg_begin();
  Value *x = args++, *table = args++, *rowBegin = args++, *rowEnd = args++, *past = args++;

  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", fn));
  VectorMath math(b, *module, shape.fma);
  const int W = shape.vectorFloats;
  auto* vecTy = llvm::FixedVectorType::get(b.getFloatTy(), W);
  const int64_t half = spec.headDim / 2, whole = half / W * W;
  auto at = [&](Value* base, Value* offset) { return b.CreateGEP(b.getFloatTy(), base, offset); };

  LoopBuilder(b).forRange(rowBegin, rowEnd, 1, "row", [&](Value* r) {
    Value* pos = b.CreateAdd(past, b.CreateURem(r, b.getInt64(spec.seq)), "pos");
    Value* cosRow = at(table, b.CreateMul(pos, b.getInt64(spec.headDim)));
    Value* sinRow = at(cosRow, b.getInt64(half));
    Value* row = at(x, b.CreateMul(r, b.getInt64(spec.ld)));
    LoopBuilder(b).forRange(b.getInt64(0), b.getInt64(spec.heads), 1, "head", [&](Value* h) {
      Value* first = at(row, b.CreateMul(h, b.getInt64(spec.headDim)));
      Value* second = at(first, b.getInt64(half));
      auto rotate = [&](Value* i, int64_t lanes) {
        Value* x1 = loadFirstLanes(b, vecTy, at(first, i), lanes);
        Value* x2 = loadFirstLanes(b, vecTy, at(second, i), lanes);
        Value* c = loadFirstLanes(b, vecTy, at(cosRow, i), lanes);
        Value* s = loadFirstLanes(b, vecTy, at(sinRow, i), lanes);
        Value* y1 = math.mulAdd(x1, c, b.CreateFNeg(b.CreateFMul(x2, s)));
        Value* y2 = math.mulAdd(x2, c, b.CreateFMul(x1, s));
        storeFirstLanes(b, y1, at(first, i), lanes, shape.maskedStores);
        storeFirstLanes(b, y2, at(second, i), lanes, shape.maskedStores);
      };
      if (whole > 0)
        LoopBuilder(b).forRange(b.getInt64(0), b.getInt64(whole), W, "i", [&](Value* i) { rotate(i, W); });
      if (half % W) rotate(b.getInt64(whole), half % W);
    });
  });
  b.CreateRetVoid();
  return module;
}

} // namespace nnc::codegen
