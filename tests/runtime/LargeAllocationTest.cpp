// allocateLarge: alignment promises for small and huge-page-sized buffers, and the
// memory is usable to its last byte; allocateLargeZeroed's buffers hold zeros.
// allocatePacked: small buffers follow one another in one 2 MiB-aligned chunk, which
// outlives the allocator's reference only while a buffer in it does.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "runtime/LargeAllocation.h"

namespace nnc::testing {
namespace {

TEST(LargeAllocation, SmallBuffersKeepTheRequestedAlignment) {
  for (size_t bytes : {size_t(1), size_t(100), size_t(4096), runtime::kHugePageBytes - 4}) {
    void* p = runtime::allocateLarge(bytes, 64);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
    std::memset(p, 0x5a, bytes);
    std::free(p);
  }
}

TEST(LargeAllocation, LargeBuffersStartOnAHugePage) {
  for (size_t bytes : {runtime::kHugePageBytes, runtime::kHugePageBytes * 3 + 17}) {
    auto* p = static_cast<unsigned char*>(runtime::allocateLarge(bytes, 64));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % runtime::kHugePageBytes, 0u);
    std::memset(p, 1, bytes);
    EXPECT_EQ(p[bytes - 1], 1);
    std::free(p);
  }
}

TEST(LargeAllocation, ZeroedBuffersAreZeroToTheirLastByte) {
  // Freed dirty buffers first, so that malloc has non-zero memory to hand back.
  for (size_t bytes : {size_t(100), runtime::kHugePageBytes + 4096}) {
    void* dirty = runtime::allocateLarge(bytes, 64);
    ASSERT_NE(dirty, nullptr);
    std::memset(dirty, 0xa5, bytes);
    std::free(dirty);
    auto* p = static_cast<unsigned char*>(runtime::allocateLargeZeroed(bytes, 64));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
    size_t nonZero = 0;
    for (size_t i = 0; i < bytes; ++i) nonZero += p[i] != 0;
    EXPECT_EQ(nonZero, 0u) << bytes << " bytes";
    std::free(p);
  }
}

TEST(LargeAllocation, PackedBuffersShareAHugePageChunk) {
  std::shared_ptr<void> a = runtime::allocatePacked(100, 64), b = runtime::allocatePacked(5000, 64);
  ASSERT_TRUE(a && b);
  auto at = [](const std::shared_ptr<void>& p) { return reinterpret_cast<uintptr_t>(p.get()); };
  EXPECT_EQ(at(b) % 64, 0u);
  // b follows a (rounded to the alignment) unless a's chunk had no room left for it.
  if (at(b) / runtime::kHugePageBytes == at(a) / runtime::kHugePageBytes) EXPECT_EQ(at(b), at(a) + 128);
  else EXPECT_EQ(at(b) % runtime::kHugePageBytes, 0u);
  std::memset(b.get(), 7, 5000);

  // A chunk with no buffer left is gone: the next buffer starts a new one.
  a.reset();
  b.reset();
  std::shared_ptr<void> c = runtime::allocatePacked(runtime::kHugePageBytes - 64, 64);
  ASSERT_TRUE(c);
  EXPECT_EQ(at(c) % runtime::kHugePageBytes, 0u);
  std::memset(c.get(), 3, runtime::kHugePageBytes - 64);

  // One that does not fit the rest of the chunk starts another; c's stays c's.
  std::shared_ptr<void> d = runtime::allocatePacked(128, 64);
  ASSERT_TRUE(d);
  EXPECT_EQ(at(d) % runtime::kHugePageBytes, 0u);
  EXPECT_NE(at(d), at(c));
  EXPECT_EQ(static_cast<unsigned char*>(c.get())[runtime::kHugePageBytes - 65], 3);

  // Buffers of 2 MiB or more are allocateLarge's, each on its own huge pages.
  std::shared_ptr<void> e = runtime::allocatePacked(runtime::kHugePageBytes + 1, 64);
  ASSERT_TRUE(e);
  EXPECT_EQ(at(e) % runtime::kHugePageBytes, 0u);
}

} // namespace
} // namespace nnc::testing
