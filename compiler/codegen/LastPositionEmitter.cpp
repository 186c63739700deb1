// Last position: per sequence b, a vector copy of row b·seq + seq − 1 to row b.
#include "compiler/codegen/LastPositionEmitter.h"

#include <llvm/IR/IRBuilder.h>

#include <stdexcept>

#include "compiler/codegen/KernelFunction.h"
#include "compiler/codegen/LoopBuilder.h"
#include "compiler/codegen/PartialVector.h"

namespace nnc::codegen {

using llvm::Value;

std::string lastPositionFunctionName(const LastPositionSpec& spec) { return "nnc_" + spec.key(); }

void validateLastPositionSpec(const LastPositionSpec& s) {
  if (s.rows < 0 || s.seq < 1 || s.cols < 1)
    throw std::invalid_argument("last position " + s.key() + ": need rows >= 0, seq >= 1 and cols >= 1 (rows " +
                                std::to_string(s.rows) + ")");
}

std::unique_ptr<llvm::Module> emitLastPositionModule(llvm::LLVMContext& ctx, const LastPositionSpec& spec,
                                                     const MicroKernelShape& shape) {
  validateLastPositionSpec(spec);
  auto module = std::make_unique<llvm::Module>(lastPositionFunctionName(spec), ctx);
  llvm::Function* fn = createKernelFunction(*module, lastPositionFunctionName(spec),
                                            {"x", "out"}, {"rowBegin", "rowEnd"});
  auto args = fn->arg_begin();
  Value *x = args++, *out = args++, *rowBegin = args++, *rowEnd = args++;

  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", fn));
  const int W = shape.vectorFloats;
  auto* vecTy = llvm::FixedVectorType::get(b.getFloatTy(), W);
  const int64_t whole = spec.cols / W * W;
  auto at = [&](Value* base, Value* offset) { return b.CreateGEP(b.getFloatTy(), base, offset); };
  LoopBuilder(b).forRange(rowBegin, rowEnd, 1, "row", [&](Value* r) {
    Value* last = b.CreateAdd(b.CreateMul(r, b.getInt64(spec.seq)), b.getInt64(spec.seq - 1));
    Value* src = at(x, b.CreateMul(last, b.getInt64(spec.cols)));
    Value* dst = at(out, b.CreateMul(r, b.getInt64(spec.cols)));
    auto copy = [&](Value* c, int64_t lanes) {
      storeFirstLanes(b, loadFirstLanes(b, vecTy, at(src, c), lanes), at(dst, c), lanes, shape.maskedStores);
    };
    if (whole > 0) LoopBuilder(b).forRange(b.getInt64(0), b.getInt64(whole), W, "col", [&](Value* c) { copy(c, W); });
    if (spec.cols % W) copy(b.getInt64(whole), spec.cols % W);
  });
  b.CreateRetVoid();
  return module;
}

} // namespace nnc::codegen
