// The IR's invariants, checked after every pass in debug use and by tests:
// ops[0] is the only Input; every input refers to an earlier op; every op is typed
// with positive dimensions and the batch as its first axis; Add joins equal types;
// parameter names are unique. A violation is a compiler bug, not a user error.
#pragma once
#include <string>
#include <vector>

#include "compiler/ir/Ir.h"

namespace nnc::ir {
// Returns one message per violated invariant (empty: the graph is well formed).
std::vector<std::string> verifyGraph(const Graph &g);
}
