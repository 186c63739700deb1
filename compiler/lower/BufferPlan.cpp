#include "compiler/lower/BufferPlan.h"

#include <map>

namespace nnc::lower {

namespace {
// First-fit allocation in a growing arena, with coalescing of freed neighbours.
class Arena {
public:
  int64_t allocate(int64_t size) {
    for (auto it = free_.begin(); it != free_.end(); ++it)
      if (it->second >= size) {
        int64_t off = it->first, rest = it->second - size;
        free_.erase(it);
        if (rest) free_[off + size] = rest;
        return off;
      }
    int64_t off = size_;
    size_ += size;
    return off;
  }
  void release(int64_t off, int64_t size) {
    auto it = free_.emplace(off, size).first;
    auto next = std::next(it);
    if (next != free_.end() && it->first + it->second == next->first) {
      it->second += next->second;
      free_.erase(next);
    }
    if (it != free_.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        free_.erase(it);
      }
    }
  }
  int64_t size() const { return size_; }

private:
  std::map<int64_t, int64_t> free_; // offset → size, in floats
  int64_t size_ = 0;
};

int64_t padded(int64_t elements) { return (elements + 15) / 16 * 16; }
} // namespace

void planBuffers(KernelProgram &p) {
  const int32_t steps = int32_t(p.steps.size());
  auto base = [&](BufferId b) { return p.buffers[size_t(b)].viewOf >= 0 ? p.buffers[size_t(b)].viewOf : b; };
  for (Buffer &b : p.buffers) b.firstStep = b.lastStep = -1;
  auto use = [&](BufferId id, int32_t s) {
    Buffer &b = p.buffers[size_t(base(id))];
    if (b.firstStep < 0) b.firstStep = s;
    b.lastStep = std::max(b.lastStep, s);
  };
  use(p.input, 0);
  for (int32_t s = 0; s < steps; ++s)
    for (const Operand &o : p.steps[size_t(s)].operands)
      if (o.kind == Operand::Kind::Buffer) use(o.id, s);
  use(p.output, std::max(steps - 1, 0));
  p.buffers[size_t(base(p.output))].lastStep = steps; // the result outlives the run

  std::vector<std::vector<BufferId>> starting(size_t(steps) + 1), ending(size_t(steps) + 1);
  for (size_t i = 0; i < p.buffers.size(); ++i) {
    const Buffer &b = p.buffers[i];
    if (b.viewOf >= 0 || b.firstStep < 0) continue;
    starting[size_t(b.firstStep)].push_back(BufferId(i));
    ending[size_t(b.lastStep)].push_back(BufferId(i));
  }
  Arena arena;
  for (int32_t s = 0; s <= steps; ++s) {
    for (BufferId id : starting[size_t(s)]) p.buffers[size_t(id)].offset = arena.allocate(padded(p.buffers[size_t(id)].elements));
    for (BufferId id : ending[size_t(s)]) arena.release(p.buffers[size_t(id)].offset, padded(p.buffers[size_t(id)].elements));
  }
  for (Buffer &b : p.buffers)
    if (b.viewOf >= 0) b.offset = p.buffers[size_t(b.viewOf)].offset;
  p.arenaFloats = arena.size();
}

} // namespace nnc::lower
