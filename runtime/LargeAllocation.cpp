#include "runtime/LargeAllocation.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>

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

} // namespace nnc::runtime
