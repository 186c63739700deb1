// How much stack a compiled kernel takes, read from its object file. The engine's
// target machines emit LLVM's `.stack_sizes` section (TargetOptions::
// EmitStackSizeSection): for every function, its address (relocated at link time, so 0
// here) and its frame's size in bytes as ULEB128. The kernels keep their scratch in
// fixed-size frames (converted rows, widened panels, tile sums: KernelStack.h), so the
// frame sizes are exact, known before the first call; CompiledModel sizes the threads
// its kernels run on from them.
#pragma once
#include <llvm/Support/MemoryBufferRef.h>

#include <cstddef>
#include <optional>

namespace nnc::runtime {

// The sum of the frames of every function in the object: the deepest its kernel can go
// (a kernel calls only its own module's functions and small helpers, never itself).
// nullopt when the object has no `.stack_sizes` section or it is malformed.
std::optional<size_t> objectStackBytes(llvm::MemoryBufferRef object);

} // namespace nnc::runtime
