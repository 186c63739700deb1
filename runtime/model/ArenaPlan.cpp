#include "runtime/model/ArenaPlan.h"

#include <map>

namespace nnc::runtime {

bool isViewOp(ir::OpKind k) {
  return k == ir::OpKind::Flatten || k == ir::OpKind::Identity || k == ir::OpKind::Dropout;
}

ArenaPlan planArena(const ir::Graph &g) {
  const size_t n = g.ops.size();
  ArenaPlan plan;
  plan.offset.assign(n, 0);
  plan.isView.assign(n, false);
  // root[i]: the op whose buffer holds value i; lastUse per root.
  std::vector<size_t>& root = plan.root;
  root.assign(n, 0);
  std::vector<size_t> lastUse(n);
  for (size_t i = 0; i < n; ++i) {
    plan.isView[i] = i > 0 && isViewOp(g.ops[i].kind);
    root[i] = plan.isView[i] ? root[size_t(g.ops[i].inputs[0])] : i;
    lastUse[root[i]] = std::max(lastUse[root[i]], i);
    for (ir::ValueId v : g.ops[i].inputs) lastUse[root[size_t(v)]] = std::max(lastUse[root[size_t(v)]], i);
    if (g.ops[i].residualInput >= 0)
      lastUse[root[size_t(g.ops[i].residualInput)]] = std::max(lastUse[root[size_t(g.ops[i].residualInput)]], i);
  }
  lastUse[root[size_t(g.output)]] = n; // the result outlives the run
  std::map<int64_t, int64_t> freeBlocks; // offset → size, in floats
  auto allocate = [&](int64_t size) {
    for (auto it = freeBlocks.begin(); it != freeBlocks.end(); ++it)
      if (it->second >= size) {
        int64_t off = it->first, rest = it->second - size;
        freeBlocks.erase(it);
        if (rest) freeBlocks[off + size] = rest;
        return off;
      }
    int64_t off = plan.sizeFloats;
    plan.sizeFloats += size;
    return off;
  };
  auto release = [&](int64_t off, int64_t size) {
    auto it = freeBlocks.emplace(off, size).first;
    auto next = std::next(it);
    if (next != freeBlocks.end() && it->first + it->second == next->first) {
      it->second += next->second;
      freeBlocks.erase(next);
    }
    if (it != freeBlocks.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        freeBlocks.erase(it);
      }
    }
  };
  // Sizes rounded up to 16 floats so every buffer starts 64-byte aligned.
  auto padded = [](int64_t elems) { return (elems + 15) / 16 * 16; };
  std::vector<std::vector<size_t>> dying(n + 1); // roots whose last reader is op i
  for (size_t v = 0; v < n; ++v)
    if (root[v] == v) dying[lastUse[v]].push_back(v);
  for (size_t i = 0; i < n; ++i) {
    if (plan.isView[i]) {
      plan.offset[i] = plan.offset[root[i]];
    } else {
      plan.offset[i] = allocate(padded(g.ops[i].type.elements()));
    }
    for (size_t v : dying[i]) release(plan.offset[v], padded(g.ops[v].type.elements()));
  }
  return plan;
}

} // namespace nnc::runtime
