#include "compiler/codegen/KernelFunction.h"

#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/Intrinsics.h>

#include <vector>

namespace nnc::codegen {

llvm::Function* createKernelFunction(llvm::Module& module, const std::string& name,
                                     std::initializer_list<const char*> pointers,
                                     std::initializer_list<const char*> integers) {
  llvm::LLVMContext& ctx = module.getContext();
  std::vector<llvm::Type*> types(pointers.size(), llvm::PointerType::getUnqual(ctx));
  types.insert(types.end(), integers.size(), llvm::Type::getInt64Ty(ctx));
  auto* fnTy = llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), types, false);
  auto* fn = llvm::Function::Create(fnTy, llvm::Function::ExternalLinkage, name, module);
  auto arg = fn->arg_begin();
  for (const char* n : pointers) (arg++)->setName(n);
  for (const char* n : integers) (arg++)->setName(n);
  fn->setDoesNotThrow();
  return fn;
}

void emitPrefetch(llvm::IRBuilder<>& b, llvm::Value* ptr, bool forWrite, int locality) {
  llvm::Function* prefetch = llvm::Intrinsic::getDeclaration(b.GetInsertBlock()->getModule(),
                                                             llvm::Intrinsic::prefetch, {b.getPtrTy()});
  b.CreateCall(prefetch, {ptr, b.getInt32(forWrite ? 1 : 0), b.getInt32(locality), b.getInt32(1)});
}

void emitPrefetchLines(llvm::IRBuilder<>& b, llvm::Value* ptr, int64_t bytes, int locality) {
  constexpr int64_t kLineBytes = 64;
  for (int64_t line = 0; line < bytes; line += kLineBytes)
    emitPrefetch(b, line == 0 ? ptr : b.CreateGEP(b.getInt8Ty(), ptr, b.getInt64(line)), false, locality);
}

} // namespace nnc::codegen
