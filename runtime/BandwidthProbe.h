// The machine's memory read bandwidth, measured: the slope of the roofline that
// `--svg` draws, and the ceiling `--generate` compares its weight streaming with. Each
// thread sums its share of a buffer twice the last-level cache (256 MiB … 1 GiB,
// written once first so the pages exist; in huge pages, as packed weights are) with the
// widest loads the host has (SSE2 or AVX-512F), as one sequential stream or as
// 4 or 8 interleaved ones: which reads fastest differs by host (Zen 4: one stream;
// Sapphire Rapids: several, 1.4× one), and a GEMV reads several panels at once.
// Bandwidth = bytes read over the wall time of the slowest thread, best of every pass.
#pragma once

namespace nnc::runtime {

struct ReadBandwidth {
  double gbPerSecond = 0; // 10^9 B/s over all threads
  int threads = 1;
  int streamsPerThread = 1; // the way of reading that gave gbPerSecond
  double bufferMiB = 256;
};

// `passes` rounds, each timing every stream count once (interleaved, so a noisy minute
// hits them alike).
ReadBandwidth measureReadBandwidth(int threads, int passes = 3);

} // namespace nnc::runtime
