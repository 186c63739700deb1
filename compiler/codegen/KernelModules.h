// One entry point from a KernelSpec (any family) to the code that builds it, so the JIT
// engine, the kernel cache and --emit never name a kernel family.
#pragma once
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <functional>
#include <memory>
#include <string>

#include "compiler/codegen/CpuTable.h"
#include "compiler/codegen/KernelSpec.h"

namespace nnc::codegen {

using ModuleFactory = std::function<std::unique_ptr<llvm::Module>(llvm::LLVMContext&)>;

struct KernelModule {
  std::string functionName; // the kernel's symbol in the module
  ModuleFactory build;      // emits the module; holds copies of the spec and the row
};

// Validates the spec (std::invalid_argument says what is wrong) and returns how to
// build it for the micro-kernel row `shape` on a target with `features` (what the code
// may use beyond the row, e.g. F16C).
KernelModule kernelModule(const KernelSpec& spec, const MicroKernelShape& shape, const CpuFeatures& features = {});

} // namespace nnc::codegen
