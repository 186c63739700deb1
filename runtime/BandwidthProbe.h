// The machine's memory read bandwidth, measured: the slope of the roofline that
// `--svg` draws. Each thread sums its share of a buffer twice the last-level cache
// (256 MiB … 1 GiB, written once first so the pages exist) with SSE loads; bandwidth =
// bytes read over the wall time of the slowest thread, best of a few passes.
#pragma once

namespace nnc::runtime {

struct ReadBandwidth {
  double gbPerSecond = 0; // 10^9 B/s over all threads
  int threads = 1;
  double bufferMiB = 256;
};

ReadBandwidth measureReadBandwidth(int threads, int passes = 3);

} // namespace nnc::runtime
