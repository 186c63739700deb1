// allocateLarge: alignment promises for small and huge-page-sized buffers, and the
// memory is usable to its last byte.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

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

} // namespace
} // namespace nnc::testing
