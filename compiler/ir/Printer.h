// Textual IR (`--emit ir`): one line per op, SSA style, with types, every option's
// value (as the op table stores it), what rewrites set, parameter tensors and the
// source line.
#pragma once
#include <string>

#include "compiler/ir/Ir.h"

namespace nnc::ir {
std::string printGraph(const Graph &g);
}
