// Allocation for the big long-lived buffers kernels stream through: packed weights
// and the activation arena.
//
// allocateLarge guarantees: the result is aligned to at least `alignment` (a power of
// two) and is released with std::free; null only when the system cannot allocate.
// Buffers of 2 MiB or more start on a 2 MiB boundary, are rounded up to whole 2 MiB,
// and are marked MADV_HUGEPAGE, so that Linux's transparent huge pages (often in
// "madvise" mode) can back them: with 4 KiB pages a batch-1 layer streaming 64 MiB of
// weights misses the TLB on every page (1×4096×4096: 13.9 -> 16.9 GFLOP/s measured,
// 2048³ +1 %). Without THP the advice is ignored and the buffer is an ordinary one.
//
// allocateLargeZeroed is allocateLarge for the memory a run writes (the activation
// arena, the KV cache): the buffer is zeroed here, so that its pages are faulted in when
// the model or decoder is made and not inside the first run, where they were timed as
// the first layers' work (TinyLlama's prefill at 2 threads on a Zen 4 guest, whose huge
// pages fault at ~0.5 GB/s: the KV-cache append 20 ms and the embedding gather 10 ms of
// a 1.05 s prefill, 0.3 and 0.2 ms once the 31 MB were touched beforehand).
//
// allocatePacked is for weights, which a batch-1 call reads whole every time: buffers
// under 2 MiB are placed one after another in shared 2 MiB chunks marked the same way,
// so that a small model's layers lie in one physically contiguous page. The L2 cache
// is indexed by physical address (1 MiB, 16 ways: 64 KiB per way on Zen 5), and
// scattered 4 KiB pages fill some of its sets beyond their ways while others stay
// empty, so weights that fit it by size still spill: MNIST's 0.94 MB at batch 1 took
// 5.07 µs (185 GB/s) in 4 KiB pages against the 222 GB/s L2 read probe, 4.5 µs in
// a huge page. A chunk is freed with its last buffer; larger buffers are allocateLarge's.
#pragma once
#include <cstddef>
#include <memory>

namespace nnc::runtime {

inline constexpr size_t kHugePageBytes = size_t(2) << 20;

void* allocateLarge(size_t bytes, size_t alignment);
void* allocateLargeZeroed(size_t bytes, size_t alignment);

// Aligned to `alignment` (a power of two, at most 2 MiB); null when the system cannot
// allocate. Safe to call from several threads.
std::shared_ptr<void> allocatePacked(size_t bytes, size_t alignment);

} // namespace nnc::runtime
