// Textual IR (`--emit ir`): one line per op, SSA style, with types, attributes that
// differ from the defaults, parameter tensors and the source line.
#pragma once
#include <string>

#include "compiler/ir/Ir.h"

namespace nnc::ir {
std::string printGraph(const Graph &g);
}
