// Every kernel is one function in its own module with the C signature
//   void f(pointer arguments..., int64_t arguments...)
// (the runtime's StepKernels call it through a matching function pointer type). This
// makes that function: external, named arguments, marked nounwind (kernels never throw).
#pragma once
#include <llvm/IR/Function.h>
#include <llvm/IR/Module.h>

#include <initializer_list>
#include <string>

namespace nnc::codegen {

llvm::Function* createKernelFunction(llvm::Module& module, const std::string& name,
                                     std::initializer_list<const char*> pointers,
                                     std::initializer_list<const char*> integers);

} // namespace nnc::codegen
