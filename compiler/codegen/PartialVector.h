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
#include <vector>

namespace nnc::codegen {

// Lanes >= W: a plain vector load; else a masked load with `fill` in the other lanes.
llvm::Value* loadFirstLanes(llvm::IRBuilder<>& b, llvm::FixedVectorType* ty, llvm::Value* ptr,
                            int64_t lanes, float fill = 0.0f);
// Lanes >= W: a plain vector store; else pieces as above, or with `masked` (for
// AVX-512 code, where it is one vmovups with a mask register) a constant-mask
// llvm.masked.store.
void storeFirstLanes(llvm::IRBuilder<>& b, llvm::Value* v, llvm::Value* ptr, int64_t lanes,
                     bool masked = false);

// Lanes 0, stride, 2·stride, … of `pieces` (vectors of one type, a row read a vector at
// a time) laid end to end: the first `lanes` of them in one vector of that type, lane 0
// again in the lanes after. The pieces are joined in pairs (a zero vector pads an odd
// count), then one shuffle picks the lanes.
llvm::Value* stridedLanes(llvm::IRBuilder<>& b, std::vector<llvm::Value*> pieces, int64_t stride, int64_t lanes);

} // namespace nnc::codegen
