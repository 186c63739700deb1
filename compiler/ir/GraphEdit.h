// Small editing utilities for rewrites: redirect uses of a value, and drop ops that
// no longer feed the output (renumbering every ValueId).
#pragma once
#include "compiler/ir/Ir.h"

namespace nnc::ir {
void replaceAllUses(Graph &g, ValueId from, ValueId to);
// Number of ops that read `v` (the graph's output counts as a reader).
int countReaders(const Graph &g, ValueId v);
void removeDeadOps(Graph &g);

// Who reads each value, kept current through a rewrite's edits: countReaders and
// replaceAllUses scan the whole graph, so a pass calling them per op was quadratic
// (80,000 layers: minutes).
class UseLists {
public:
  explicit UseLists(const Graph &g);
  // As countReaders: each read by an op's inputs or residual, and the graph's output.
  int readers(ValueId v) const { return int(users_[size_t(v)].size()) + (output_ == v ? 1 : 0); }
  // As replaceAllUses, in time proportional to `from`'s readers.
  void replaceAllUses(Graph &g, ValueId from, ValueId to);
  // Before `op`'s inputs are cleared (it is dead): its reads no longer count.
  void dropReads(const Graph &g, ValueId op);
  // `op` reads `v` now too (a residual moved into a layer).
  void addRead(ValueId v, ValueId op) { users_[size_t(v)].push_back(op); }

private:
  std::vector<std::vector<ValueId>> users_; // per value: the ops reading it, once per read
  ValueId output_;
};
}
