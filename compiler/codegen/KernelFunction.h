// Every kernel is one function in its own module with the C signature
//   void f(pointer arguments..., int64_t arguments...)
// (the runtime's StepKernels call it through a matching function pointer type). This
// makes that function: external, named arguments, marked nounwind (kernels never throw).
#pragma once
#include <llvm/IR/Function.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

#include <initializer_list>
#include <string>

namespace nnc::codegen {

llvm::Function* createKernelFunction(llvm::Module& module, const std::string& name,
                                     std::initializer_list<const char*> pointers,
                                     std::initializer_list<const char*> integers);

// A data prefetch of the line at `ptr` (llvm.prefetch): for writing or reading, into the
// cache level `locality` asks for (3: L1, 2: L2). A prefetch never faults, so `ptr` may
// point past the buffer.
void emitPrefetch(llvm::IRBuilder<>& b, llvm::Value* ptr, bool forWrite = false, int locality = 3);
// Read prefetches of every 64-byte line of the `bytes` bytes from `ptr` (into L1, or the
// level `locality` asks for).
void emitPrefetchLines(llvm::IRBuilder<>& b, llvm::Value* ptr, int64_t bytes, int locality = 3);

} // namespace nnc::codegen
