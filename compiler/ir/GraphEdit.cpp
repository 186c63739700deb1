#include "compiler/ir/GraphEdit.h"

#include <algorithm>

namespace nnc::ir {

void replaceAllUses(Graph &g, ValueId from, ValueId to) {
  for (auto &op : g.ops) {
    for (auto &v : op.inputs)
      if (v == from) v = to;
    if (op.residualInput == from) op.residualInput = to;
  }
  if (g.output == from) g.output = to;
}

int countReaders(const Graph &g, ValueId v) {
  int n = g.output == v ? 1 : 0;
  for (const auto &op : g.ops) {
    for (ValueId in : op.inputs) n += in == v;
    n += op.residualInput == v;
  }
  return n;
}

UseLists::UseLists(const Graph &g) : users_(g.ops.size()), output_(g.output) {
  for (size_t i = 0; i < g.ops.size(); ++i) {
    for (ValueId in : g.ops[i].inputs) users_[size_t(in)].push_back(ValueId(i));
    if (g.ops[i].residualInput >= 0) users_[size_t(g.ops[i].residualInput)].push_back(ValueId(i));
  }
}

void UseLists::replaceAllUses(Graph &g, ValueId from, ValueId to) {
  for (ValueId u : users_[size_t(from)]) {
    Op &op = g.op(u);
    for (auto &v : op.inputs)
      if (v == from) v = to;
    if (op.residualInput == from) op.residualInput = to;
  }
  auto &into = users_[size_t(to)];
  into.insert(into.end(), users_[size_t(from)].begin(), users_[size_t(from)].end());
  users_[size_t(from)].clear();
  if (output_ == from) output_ = g.output = to;
}

void UseLists::dropReads(const Graph &g, ValueId op) {
  auto drop = [&](ValueId v) {
    auto &users = users_[size_t(v)];
    if (auto at = std::find(users.begin(), users.end(), op); at != users.end()) users.erase(at);
  };
  for (ValueId in : g.op(op).inputs) drop(in);
  if (g.op(op).residualInput >= 0) drop(g.op(op).residualInput);
}

void removeDeadOps(Graph &g) {
  std::vector<bool> live(g.ops.size(), false);
  live[0] = true;
  live[size_t(g.output)] = true;
  for (size_t i = g.ops.size(); i-- > 0;) {
    if (!live[i]) continue;
    for (ValueId v : g.ops[i].inputs) live[size_t(v)] = true;
    if (g.ops[i].residualInput >= 0) live[size_t(g.ops[i].residualInput)] = true;
  }
  std::vector<ValueId> remap(g.ops.size(), -1);
  std::vector<Op> kept;
  for (size_t i = 0; i < g.ops.size(); ++i)
    if (live[i]) {
      remap[i] = ValueId(kept.size());
      kept.push_back(std::move(g.ops[i]));
    }
  for (auto &op : kept) {
    for (auto &v : op.inputs) v = remap[size_t(v)];
    if (op.residualInput >= 0) op.residualInput = remap[size_t(op.residualInput)];
  }
  g.output = remap[size_t(g.output)];
  g.ops = std::move(kept);
}

} // namespace nnc::ir
