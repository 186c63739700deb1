#include "runtime/BandwidthProbe.h"

#include <immintrin.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

namespace nnc::runtime {

namespace {
// Sums n floats (n a multiple of 16, p 16-byte aligned) with four SSE accumulators, so
// the loop is bound by loads, not by the adds' latency (SSE2 is every x86-64's); the
// result is returned so the reads are kept.
float sumFloats(const float *p, size_t n) {
  __m128 a0 = _mm_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i < n; i += 16) {
    a0 = _mm_add_ps(a0, _mm_load_ps(p + i));
    a1 = _mm_add_ps(a1, _mm_load_ps(p + i + 4));
    a2 = _mm_add_ps(a2, _mm_load_ps(p + i + 8));
    a3 = _mm_add_ps(a3, _mm_load_ps(p + i + 12));
  }
  float lanes[4];
  _mm_storeu_ps(lanes, _mm_add_ps(_mm_add_ps(a0, a1), _mm_add_ps(a2, a3)));
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

// Twice the last-level cache (so the buffer comes from DRAM), at least 256 MiB and at
// most 1 GiB.
size_t bufferBytes() {
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  const size_t want = l3 > 0 ? 2 * size_t(l3) : 0;
  return std::clamp<size_t>(want, size_t(256) << 20, size_t(1) << 30);
}
} // namespace

ReadBandwidth measureReadBandwidth(int threads, int passes) {
  ReadBandwidth r;
  r.threads = std::max(1, threads);
  const size_t bytes = bufferBytes();
  r.bufferMiB = double(bytes) / double(1 << 20);
  const size_t floats = bytes / sizeof(float); // a multiple of 16 per thread share below
  std::unique_ptr<float[]> buffer(new float[floats]);
  std::fill(buffer.get(), buffer.get() + floats, 1.0f);
  volatile float sink = 0;
  double best = 0;
  for (int pass = 0; pass < std::max(1, passes); ++pass) {
    std::vector<std::thread> workers;
    std::vector<float> sums(size_t(r.threads));
    const auto start = std::chrono::steady_clock::now();
    try {
      for (int t = 0; t < r.threads; ++t)
        workers.emplace_back([&, t] {
          const size_t blocks = floats / 16;
          const size_t begin = blocks * size_t(t) / size_t(r.threads) * 16,
                       end = blocks * size_t(t + 1) / size_t(r.threads) * 16;
          sums[size_t(t)] = sumFloats(buffer.get() + begin, end - begin);
        });
    } catch (...) { // no more threads: a probe on fewer would mislead; join, then say so
      for (auto &w : workers) w.join();
      throw;
    }
    for (auto &w : workers) w.join();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (float s : sums) sink = sink + s;
    best = std::max(best, double(floats * sizeof(float)) / seconds / 1e9);
  }
  r.gbPerSecond = best;
  return r;
}

} // namespace nnc::runtime
