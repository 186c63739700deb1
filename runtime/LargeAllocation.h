// Allocation for the big long-lived buffers kernels stream through: packed weights
// and the activation arena.
//
// Guarantees: the result is aligned to at least `alignment` (a power of two) and is
// released with std::free; null only when the system cannot allocate. Buffers of
// 2 MiB or more start on a 2 MiB boundary, are rounded up to whole 2 MiB, and are
// marked MADV_HUGEPAGE, so that Linux's transparent huge pages (often in "madvise"
// mode) can back them: with 4 KiB pages a batch-1 layer streaming 64 MiB of weights
// misses the TLB on every page (1×4096×4096: 13.9 -> 16.9 GFLOP/s measured, 2048³
// +1 %). Without THP the advice is ignored and the buffer is an ordinary one.
#pragma once
#include <cstddef>

namespace nnc::runtime {

inline constexpr size_t kHugePageBytes = size_t(2) << 20;

void* allocateLarge(size_t bytes, size_t alignment);

} // namespace nnc::runtime
