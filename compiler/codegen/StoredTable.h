// Reads a table stored below f32 in rowTableLayout (PackLayout.h: rows contiguous, i8
// one scale per row, i4 two rows a byte with scale groups along the row) as f32
// vectors: the gather (embedding), AddPositions (pos_embedding) and norm kernels
// share it. The lanes are loaded one by one and widened together: these kernels touch
// each stored element once per row they produce, far from the GEMMs' share of time.
#pragma once
#include <llvm/IR/IRBuilder.h>

#include <cstdint>

#include "compiler/codegen/PackLayout.h"

namespace nnc::codegen {

// f16 bit patterns (zero-extended to i32 lanes) to f32 without F16C: rebias the
// exponent; inf/NaN get the f32 all-ones exponent; zero and subnormals go through an
// f32 subtraction of 2^-14 (exact), the usual integer-SIMD conversion.
llvm::Value* halfBitsToFloat(llvm::IRBuilder<>& b, llvm::Value* bits);

// `lanes` consecutive scales of the packed weights at `packed` (stored as `layout`),
// from scale index `index` (i64): f32 for i8, bf16 widened exactly for i4 (PackLayout.h),
// as a <lanes x float>, or a float for lanes == 1. The vector load is aligned to its
// size: the kernels read whole vectors of a panel's scales.
llvm::Value* loadScales(llvm::IRBuilder<>& b, const PanelLayout& layout, llvm::Value* packed, llvm::Value* index,
                        int lanes);

// Elements [col, col + lanes) of row `row` (i64 values) of the table at `table`, stored
// as `layout` (f16, bf16, i8 or i4; a rowTableLayout), as a <W x float> whose lanes at
// and past `lanes` are 0: f16/bf16 widened exactly, i8/i4 as q · s (the values
// storedWeightValues gives).
llvm::Value* loadStoredRow(llvm::IRBuilder<>& b, const PanelLayout& layout, llvm::Value* table, llvm::Value* row,
                           llvm::Value* col, int64_t lanes, int W);

} // namespace nnc::codegen
