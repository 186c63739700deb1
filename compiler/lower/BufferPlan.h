// The one liveness of nnc: gives every buffer of a kernel program an offset in one
// arena. The runtime allocates exactly this arena, and the report's "as nnc runs it"
// activation memory is its size.
//
// Rules: a buffer is live from the first step that uses it to the last (a view's uses
// count for its base); the model's input is live from the start and its output to the
// end. Buffers live at the same step never share storage, so a step's output never
// overlaps its inputs or scratch. Placement: greedy by size (the largest first, each at
// the lowest offset free of buffers live at the same time), or, for programs of more
// than 20,000 buffers, first fit in step order (linear time). Every buffer starts
// 64-byte aligned (sizes rounded up to 16 floats).
#pragma once
#include <cstddef>

#include "compiler/lower/KernelProgram.h"

namespace nnc::lower {

inline constexpr size_t kGreedyBySizeLimit = 20000; // buffers
// greedyLimit: programs with more buffers are placed first-fit in step order (tests
// pass 0 to check that path).
void planBuffers(KernelProgram &p, size_t greedyLimit = kGreedyBySizeLimit);

} // namespace nnc::lower
