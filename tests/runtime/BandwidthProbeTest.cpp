// measureReadBandwidth: what it reports is what it measured — a finite, positive
// bandwidth over the threads asked for, the buffer size it promises (or the spans it
// was given), and one of the ways of reading it times.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "runtime/BandwidthProbe.h"

namespace nnc::testing {
namespace {

TEST(BandwidthProbe, ReportsAPlausibleBandwidthAndHowItWasRead) {
  for (int threads : {1, 2}) {
    const runtime::ReadBandwidth r = runtime::measureReadBandwidth(threads, 1);
    EXPECT_EQ(r.threads, threads);
    EXPECT_TRUE(std::isfinite(r.gbPerSecond));
    EXPECT_GT(r.gbPerSecond, 0.05); // 50 MB/s: slower would mean the timing is broken
    EXPECT_LT(r.gbPerSecond, 10000.0);
    EXPECT_TRUE(r.streamsPerThread == 1 || r.streamsPerThread == 4 || r.streamsPerThread == 8)
        << r.streamsPerThread;
    EXPECT_GE(r.bufferMiB, 256.0);
    EXPECT_LE(r.bufferMiB, 1024.0);
  }
}

// Over given memory: the spans' bytes, read where they lie (any float's alignment, a
// span shorter than one 64-byte block read as nothing), and nothing to time is 0.
TEST(BandwidthProbe, ReadsGivenSpansWhereTheyLie) {
  std::vector<float> a(1 << 20, 1.0f), b(4099, 2.0f), c(7, 3.0f);
  const std::vector<runtime::MemorySpan> spans{
      {a.data(), a.size() * sizeof(float)}, {b.data() + 1, (b.size() - 1) * sizeof(float)}, {c.data(), 28}};
  for (int threads : {1, 2}) {
    const runtime::ReadBandwidth r = runtime::measureReadBandwidth(threads, spans, 1);
    EXPECT_EQ(r.threads, threads);
    EXPECT_TRUE(std::isfinite(r.gbPerSecond));
    EXPECT_GT(r.gbPerSecond, 0.05);
    EXPECT_LT(r.gbPerSecond, 10000.0);
    EXPECT_EQ(r.streamsPerThread, 1);
    EXPECT_DOUBLE_EQ(r.bufferMiB, double(a.size() * 4 + (b.size() - 1) * 4 + 28) / double(1 << 20));
  }
  const runtime::ReadBandwidth none = runtime::measureReadBandwidth(2, {{c.data(), 28}}, 1);
  EXPECT_EQ(none.gbPerSecond, 0.0);
  EXPECT_EQ(runtime::measureReadBandwidth(1, std::vector<runtime::MemorySpan>{}, 1).gbPerSecond, 0.0);
}

} // namespace
} // namespace nnc::testing
