// The lowering stage: the checked and rewritten IR (after the lowering pipeline of
// passes: FoldLinearChains, FuseEpilogues) → a kernel program (KernelProgram.h) with
// its buffers planned in one arena.
//
// Assumes: the graph is typed and verified. Guarantees: one buffer per IR value (a
// view op's buffer is a view of its input's base), each non-view op lowered by its
// op-table rule (compiler/ops/OpTable.h) in op order, `tensors` lists every parameter
// tensor of the graph (the file must hold exactly these), and planBuffers has run.
// Ops with no kernel yet lower to a step without one (KernelProgram::firstNotRunnable),
// so a report can plan the memory of any model.
#pragma once
#include "compiler/lower/KernelProgram.h"

namespace nnc::lower {

// kvContext > 0: a decoder's program. Causal attention keeps its keys and values in a
// KV cache of kvContext positions (a State buffer per layer) and every position-
// dependent kernel (rope, pos_embedding, the causal mask) starts at the runtime's
// `past` positions; the program then runs over past + seq <= kvContext positions. The
// cache stores kvType (f32, f16, bf16, i8: KvAppendSpec in KernelSpec.h). Over more
// than one position (a prefill), only each sequence's last position goes on after the
// last attention (a LastPositionSpec step; the layers after it are lowered at seq 1,
// when they are per position), so the output is [batch, 1, ·]: the final norm and the
// head run on batch rows, not batch·seq.
// argmax (a decoder's program only, else std::invalid_argument): greedy decoding; a last
// ArgmaxSpec step writes each logits row's first maximum as an i32 id to the buffer
// KernelProgram::argmax, the logits staying the output.
KernelProgram lowerGraph(const ir::Graph &g, const Quantisation &quant = {}, int64_t kvContext = 0,
                         DType kvType = DType::F32, bool argmax = false);

} // namespace nnc::lower
