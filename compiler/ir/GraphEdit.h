// Small editing utilities for rewrites: redirect uses of a value, and drop ops that
// no longer feed the output (renumbering every ValueId).
#pragma once
#include "compiler/ir/Ir.h"

namespace nnc::ir {
void replaceAllUses(Graph &g, ValueId from, ValueId to);
// Number of ops that read `v` (the graph's output counts as a reader).
int countReaders(const Graph &g, ValueId v);
void removeDeadOps(Graph &g);
}
