// The machine's memory read bandwidth, measured: the slope of the roofline that
// `--svg` draws, and (the second function, over the model's own weights) the ceiling
// `--generate` compares its weight streaming with. For the first, each thread sums its
// share of a buffer twice the last-level cache (256 MiB … 1 GiB, written once first so
// the pages exist; in huge pages, as packed weights are) with the widest loads the host
// has (SSE2 or AVX-512F), as one sequential stream or as 4 or 8 interleaved ones: which
// reads fastest differs by host (Zen 4: one stream; Sapphire Rapids: several, 1.4× one),
// and a GEMV reads several panels at once. Bandwidth = bytes read over the wall time of
// the slowest thread, best of every pass.
#pragma once
#include <cstddef>
#include <vector>

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

// Memory the probe below reads where it lies.
struct MemorySpan {
  const void *data = nullptr; // any float's alignment
  size_t bytes = 0;           // read in whole 64-byte blocks: a span's last < 64 bytes are not
};

// The rate at which `threads` threads read `spans` (a model's packed weights:
// CompiledModel::packedConstantSpans), each thread its share of every span as one
// stream, with the same loads; best of `passes`; 0 when the spans hold < 64 bytes.
// `--generate` measures its ceiling this way: the bytes a decode step streams, in their
// own pages, and no buffer to make (the one above, 960 MiB in huge pages, took 6-8 s
// to fault in on the Xeon guest with AMX, whose fresh huge pages are slow).
ReadBandwidth measureReadBandwidth(int threads, const std::vector<MemorySpan> &spans, int passes = 3);

} // namespace nnc::runtime
