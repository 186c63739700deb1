// The one liveness of nnc: gives every buffer of a kernel program an offset in one
// arena. The runtime allocates exactly this arena, and the report's "as nnc runs it"
// activation memory is its size.
//
// Rules: a buffer is live from the first step that uses it to the last (a view's uses
// count for its base); the model's input is live from the start and its output to the
// end. Before a step runs, the buffers it first uses are placed (first fit in the
// freed space, else at the end); after it, those it used last are freed, so a step's
// output never shares storage with its inputs or scratch. Every buffer starts 64-byte
// aligned (sizes rounded up to 16 floats).
#pragma once
#include "compiler/lower/KernelProgram.h"

namespace nnc::lower {

void planBuffers(KernelProgram &p);

} // namespace nnc::lower
