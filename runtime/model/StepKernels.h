// A step's compiled kernel behind one interface, so the model interpreter
// (CompiledModel) runs any kernel family the same way: operands resolved to pointers
// in the family's order (compiler/lower/KernelProgram.h), then run on the pool.
// A GEMM's constant B operand points to a PackedWeights, every other to f32 data.
#pragma once
#include <array>
#include <memory>

#include "compiler/codegen/KernelSpec.h"
#include "runtime/ThreadPool.h"
#include "runtime/jit/Gemm.h"
#include "runtime/jit/JitEngine.h"

namespace nnc::runtime {

using OperandPointers = std::array<const void *, 6>; // the most operands a step has (KernelProgram.h)

class StepKernel {
public:
  virtual ~StepKernel() = default;
  // Runs the kernel on resolved operands; the written operand is the last one. past:
  // positions before this call's first (a decoder's KV cache; 0 otherwise).
  virtual void run(const OperandPointers &ops, ThreadPool *pool, int64_t past) const = 0;
  // A GEMM that packs its constant B operand at load (null for other families).
  virtual const Gemm *gemm() const { return nullptr; }
};

// Compiles (or reuses from the engine) the kernel of `spec`.
std::unique_ptr<StepKernel> makeStepKernel(JitEngine &jit, const codegen::KernelSpec &spec);

} // namespace nnc::runtime
