#include "runtime/LargeAllocation.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace nnc::runtime {

void* allocateLarge(size_t bytes, size_t alignment) {
  if (bytes < kHugePageBytes) {
    size_t rounded = (std::max<size_t>(bytes, 1) + alignment - 1) / alignment * alignment;
    return std::aligned_alloc(alignment, rounded);
  }
  size_t rounded = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  void* p = std::aligned_alloc(std::max(alignment, kHugePageBytes), rounded);
#ifdef MADV_HUGEPAGE
  if (p) madvise(p, rounded, MADV_HUGEPAGE); // advice only: failure leaves 4 KiB pages
#endif
  return p;
}

void* allocateLargeZeroed(size_t bytes, size_t alignment) {
  void* p = allocateLarge(bytes, alignment);
  if (p) std::memset(p, 0, bytes);
  return p;
}

namespace {

// The chunk small packed buffers are being placed in. It holds only a weak reference:
// the buffers own their chunk (shared_ptr aliasing), so a chunk whose buffers are all
// gone is freed at once, and a new one starts at the next allocation.
struct PackedChunks {
  std::mutex mutex;
  std::weak_ptr<void> chunk;
  size_t used = 0;
};

PackedChunks& packedChunks() {
  static PackedChunks chunks;
  return chunks;
}

} // namespace

std::shared_ptr<void> allocatePacked(size_t bytes, size_t alignment) {
  if (bytes >= kHugePageBytes) {
    void* p = allocateLarge(bytes, alignment);
    if (!p) return nullptr;
    return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  }
  const size_t size = std::max<size_t>(bytes, 1);
  PackedChunks& chunks = packedChunks();
  std::lock_guard<std::mutex> lock(chunks.mutex);
  std::shared_ptr<void> chunk = chunks.chunk.lock();
  size_t offset = (chunks.used + alignment - 1) / alignment * alignment;
  if (!chunk || offset + size > kHugePageBytes) {
    void* p = allocateLarge(kHugePageBytes, alignment);
    if (!p) return nullptr;
    chunk = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
    chunks.chunk = chunk;
    offset = 0;
  }
  chunks.used = offset + size;
  return std::shared_ptr<void>(chunk, static_cast<char*>(chunk.get()) + offset);
}

} // namespace nnc::runtime
