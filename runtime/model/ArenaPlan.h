// Buffer planning: every activation of a model gets an offset in one arena, planned
// once per model. An op's output is allocated when it runs and its space is reused
// after its last reader (first fit); views (flatten, identity, dropout) share their
// input's buffer and extend its life. The graph's input and output are buffers too.
#pragma once
#include <cstdint>
#include <vector>

#include "compiler/ir/Ir.h"

namespace nnc::runtime {

struct ArenaPlan {
  std::vector<int64_t> offset; // per op, in floats
  std::vector<bool> isView;    // per op: shares its input's buffer
  std::vector<size_t> root;    // per op: the op whose buffer holds its value (itself unless a view)
  int64_t sizeFloats = 0;
};

bool isViewOp(ir::OpKind k);
ArenaPlan planArena(const ir::Graph &g);

} // namespace nnc::runtime
