// measureReadBandwidth: what it reports is what it measured — a finite, positive
// bandwidth over the threads asked for, the buffer size it promises, and one of the
// ways of reading it times.
#include <gtest/gtest.h>

#include <cmath>

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

} // namespace
} // namespace nnc::testing
