// KV-cache append: per row, its cache row from (b, i) = (r / seq, r mod seq) and past,
// then a vector copy of the row's k|v columns.
#include "compiler/codegen/KvAppendEmitter.h"

#include <llvm/IR/IRBuilder.h>

#include <stdexcept>

#include "compiler/codegen/LoopBuilder.h"
#include "compiler/codegen/PartialVector.h"

namespace nnc::codegen {

using llvm::Value;

std::string kvAppendFunctionName(const KvAppendSpec& spec) { return "nnc_" + spec.key(); }

void validateKvAppendSpec(const KvAppendSpec& s) {
  if (s.rows < 0 || s.seq < 1 || s.seq > s.context || s.cols < 1 || s.col < 0 || s.col + s.cols > s.ld)
    throw std::invalid_argument("kv append " + s.key() + ": need rows >= 0, 1 <= seq <= context, cols >= 1 and " +
                                "col + cols <= ld (rows " + std::to_string(s.rows) + ")");
}

std::unique_ptr<llvm::Module> emitKvAppendModule(llvm::LLVMContext& ctx, const KvAppendSpec& spec,
                                                 const MicroKernelShape& shape) {
  validateKvAppendSpec(spec);
  auto module = std::make_unique<llvm::Module>(kvAppendFunctionName(spec), ctx);
  llvm::Type* ptr = llvm::PointerType::getUnqual(ctx);
  llvm::Type* i64 = llvm::Type::getInt64Ty(ctx);
  auto* fnTy = llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), {ptr, ptr, i64, i64, i64}, false);
  auto* fn = llvm::Function::Create(fnTy, llvm::Function::ExternalLinkage, kvAppendFunctionName(spec), *module);
  const char* argNames[] = {"x", "cache", "rowBegin", "rowEnd", "past"};
  for (auto& arg : fn->args()) arg.setName(argNames[arg.getArgNo()]);
  fn->setDoesNotThrow();
  auto args = fn->arg_begin();
  Value *x = args++, *cache = args++, *rowBegin = args++, *rowEnd = args++, *past = args++;

  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", fn));
  const int W = shape.vectorFloats;
  auto* vecTy = llvm::FixedVectorType::get(b.getFloatTy(), W);
  const int64_t whole = spec.cols / W * W;
  auto at = [&](Value* base, Value* offset) { return b.CreateGEP(b.getFloatTy(), base, offset); };
  LoopBuilder(b).forRange(rowBegin, rowEnd, 1, "row", [&](Value* r) {
    Value* batch = b.CreateUDiv(r, b.getInt64(spec.seq));
    Value* position = b.CreateAdd(past, b.CreateURem(r, b.getInt64(spec.seq)));
    Value* cacheRow = b.CreateAdd(b.CreateMul(batch, b.getInt64(spec.context)), position);
    Value* dst = at(cache, b.CreateMul(cacheRow, b.getInt64(spec.cols)));
    Value* src = at(x, b.CreateAdd(b.CreateMul(r, b.getInt64(spec.ld)), b.getInt64(spec.col)));
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
