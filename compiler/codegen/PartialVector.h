// Loads and stores of the first `lanes` floats of a <W x float> vector, for the tails
// of rows that are not a whole number of vectors. Shared by the GEMM and elementwise
// emitters.
//
// Stores never touch memory past the `lanes` floats. A partial store is split into
// power-of-two pieces (7 lanes: 4 + 2 + 1, i.e. vmovups xmm, vmovlps, vmovss) rather
// than llvm.masked.store: without AVX-512 masks that becomes vmaskmovps, which on
// AMD Zen costs tens of cycles per store (23³ GEMM on Zen 4: 92 -> 67 GFLOP/s
// when the 7-column tail used it). Partial loads stay masked loads (cheap everywhere,
// and they do not read past the lanes either).
#pragma once
#include <llvm/IR/IRBuilder.h>

#include <cstdint>

namespace nnc::codegen {

// Lanes >= W: a plain vector load; else a masked load with `fill` in the other lanes.
llvm::Value* loadFirstLanes(llvm::IRBuilder<>& b, llvm::FixedVectorType* ty, llvm::Value* ptr,
                            int64_t lanes, float fill = 0.0f);
// Lanes >= W: a plain vector store; else pieces as above, or with `masked` (for
// AVX-512 code, where it is one vmovups with a mask register) a constant-mask
// llvm.masked.store.
void storeFirstLanes(llvm::IRBuilder<>& b, llvm::Value* v, llvm::Value* ptr, int64_t lanes,
                     bool masked = false);

} // namespace nnc::codegen
