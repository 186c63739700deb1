// Emits one attention kernel (AttentionSpec in KernelSpec.h: QKᵀ, scale, causal mask,
// softmax and AV for every head of a K/V group) as an llvm::Module, specialised on the
// sequence, the heads, the head size and every stride.
//
// The function (attentionFunctionName(spec)) has the C signature AttentionKernelFn:
//   void f(const float* q, const float* k, const float* v, float* scratch, float* out,
//          int64_t unitBegin, int64_t unitEnd, int64_t past)
// and computes the units (b, g) of [unitBegin, unitEnd) (u = b·kvHeads + g): the
// output rows of every query head of K/V head g in batch entry b. Unit u uses the
// scratch floats [u·scratchPerUnit(), (u + 1)·scratchPerUnit()), so threads given
// disjoint unit ranges never share memory. Assumes past + seq <= kvStride.
//
// One query row (seq 1, decoding): the group's query heads (up to 8 at a time) as the
// rows of one block, their scores straight from K's rows (W keys at a time, a vector of
// q · k products per head and key, the W vectors summed lane-wise into one vector of
// scores; the heads inside the key blocks), then softmax and AV as below, with the heads
// as the rows. No Kᵀ: the scratch holds only the heads' scores.
//
// Structure, per unit (seq > 1): K of head g is transposed into the scratch (Kᵀ [headDim,
// keySlots], zero past the keys), once for all the heads that share it. Then per
// query head, per block of kRowBlock query rows (the last block shorter, its own
// code):
//   scores  rows × (up to the block's last key, in vectors): broadcast q[r, c] times a
//           vector of Kᵀ row c, accumulated over c; two vectors of keys at a time;
//   softmax per row over its own keys (causal: up to its position): a lane mask
//           (key < limit) turns the rest to −inf before the max and to 0 after the
//           exp; exp(scale·s − max) is stored, its sum kept;
//   AV      rows × headDim accumulators (in chunks that fit the registers), a broadcast
//           probability times a vector of V's row per key; the sum divides at the store.
// Only the block's keys are visited, so a causal block costs what its mask keeps.
// k and v are f32 rows, or a KV cache (kvCache: a plane per K/V head, KvCacheLayout)
// stored as kvType; below f32 they widen where they are read: into Kᵀ, per K row in
// one query's scores, and per V row in AV (i8: times the position's scale).
#pragma once
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <cstdint>
#include <memory>
#include <string>

#include "compiler/codegen/CpuTable.h"
#include "compiler/codegen/KernelSpec.h"

namespace nnc::codegen {

using AttentionKernelFn = void (*)(const float* q, const float* k, const float* v, float* scratch, float* out,
                                   int64_t unitBegin, int64_t unitEnd, int64_t past);

std::string attentionFunctionName(const AttentionSpec& spec);

// Throws std::invalid_argument for non-positive sizes, kv_heads not dividing heads, a
// sequence longer than kvStride, heads that do not fit their rows (qCol + heads·hd >
// qLd, heads·hd > outLd, and for k/v rows kCol/vCol + kvHeads·hd > kvLd), or k and v
// below f32 that are not a KV cache.
void validateAttentionSpec(const AttentionSpec& spec);

std::unique_ptr<llvm::Module> emitAttentionModule(llvm::LLVMContext& ctx, const AttentionSpec& spec,
                                                  const MicroKernelShape& shape, const CpuFeatures& features = {});

} // namespace nnc::codegen
