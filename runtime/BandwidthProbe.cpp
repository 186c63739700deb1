#include "runtime/BandwidthProbe.h"
#include "runtime/LargeAllocation.h"

#include <immintrin.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <new>
#include <thread>
#include <vector>

namespace nnc::runtime {

namespace {
// Sums n floats (p any float's alignment) as `streams` (1-8) equal sub-ranges read side by
// side, 64 bytes of each per step; every stream has its own accumulator, so the loop is
// bound by loads, not by the adds' latency. The tail of n that does not split evenly is
// left out of the sum and of the byte count (readBytes). The result is returned so the
// reads are kept. SSE2 is every x86-64's; sumFloatsAvx512 below is the same loop with
// one 512-bit load a step, which reads faster where the host has it (Xeon guest with
// AMX, one thread, 960 MiB from DRAM: 18.8 GB/s with these loads, 19.4 with those).
float sumFloats(const float *p, size_t n, int streams, size_t &readBytes) {
  const size_t per = n / size_t(streams) / 16 * 16;
  __m128 acc[8];
  for (__m128 &a : acc) a = _mm_setzero_ps();
  for (size_t i = 0; i < per; i += 16)
    for (int s = 0; s < streams; ++s) {
      const float *q = p + size_t(s) * per + i;
      const __m128 x = _mm_add_ps(_mm_add_ps(_mm_loadu_ps(q), _mm_loadu_ps(q + 4)),
                                  _mm_add_ps(_mm_loadu_ps(q + 8), _mm_loadu_ps(q + 12)));
      acc[s] = _mm_add_ps(acc[s], x);
    }
  readBytes = per * size_t(streams) * sizeof(float);
  __m128 total = _mm_setzero_ps();
  for (const __m128 &a : acc) total = _mm_add_ps(total, a);
  float lanes[4];
  _mm_storeu_ps(lanes, total);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

__attribute__((target("avx512f"))) float sumFloatsAvx512(const float *p, size_t n, int streams,
                                                          size_t &readBytes) {
  const size_t per = n / size_t(streams) / 16 * 16;
  __m512 acc[8];
  for (__m512 &a : acc) a = _mm512_setzero_ps();
  for (size_t i = 0; i < per; i += 16)
    for (int s = 0; s < streams; ++s) acc[s] = _mm512_add_ps(acc[s], _mm512_loadu_ps(p + size_t(s) * per + i));
  readBytes = per * size_t(streams) * sizeof(float);
  __m512 total = _mm512_setzero_ps();
  for (const __m512 &a : acc) total = _mm512_add_ps(total, a);
  float lanes[16];
  _mm512_storeu_ps(lanes, total);
  float sum = 0;
  for (float lane : lanes) sum += lane;
  return sum;
}

// Twice the last-level cache (so the buffer comes from DRAM), at least 256 MiB and at
// most 1 GiB.
size_t bufferBytes() {
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  const size_t want = l3 > 0 ? 2 * size_t(l3) : 0;
  return std::clamp<size_t>(want, size_t(256) << 20, size_t(1) << 30);
}

using SumFn = float (*)(const float *, size_t, int, size_t &);
SumFn widestSum() { return __builtin_cpu_supports("avx512f") ? sumFloatsAvx512 : sumFloats; }

// Runs read(t) on `threads` threads at once, each returning the bytes it read; their
// total over the wall time, in GB/s.
double timedRead(int threads, const std::function<size_t(int)> &read) {
  std::vector<std::thread> workers;
  std::vector<size_t> bytes(static_cast<size_t>(threads));
  const auto start = std::chrono::steady_clock::now();
  try {
    for (int t = 0; t < threads; ++t) workers.emplace_back([&, t] { bytes[size_t(t)] = read(t); });
  } catch (...) { // no more threads: a probe on fewer would mislead; join, then say so
    for (auto &w : workers) w.join();
    throw;
  }
  for (auto &w : workers) w.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double total = 0;
  for (size_t b : bytes) total += double(b);
  return total / seconds / 1e9;
}

std::atomic<float> gSink{0}; // the sums, kept so that the reads are
} // namespace

ReadBandwidth measureReadBandwidth(int threads, int passes) {
  ReadBandwidth r;
  r.threads = std::max(1, threads);
  const size_t bytes = bufferBytes();
  r.bufferMiB = double(bytes) / double(1 << 20);
  const size_t floats = bytes / sizeof(float); // a multiple of 16 per thread share below
  // In huge pages, as packed weights are (LargeAllocation.h): with 4 KiB pages the probe
  // measured the TLB, not the memory (Xeon guest with AMX, one thread: 14.1 against 18.8
  // GB/s), and decoding seemed to stream above it.
  std::unique_ptr<float, void (*)(void *)> buffer(static_cast<float *>(allocateLarge(bytes, 64)), std::free);
  if (!buffer) throw std::bad_alloc();
  std::fill(buffer.get(), buffer.get() + floats, 1.0f);
  const SumFn sum = widestSum();
  double best = 0;
  for (int pass = 0; pass < std::max(1, passes); ++pass)
    for (int streams : {1, 4, 8}) {
      const double gbs = timedRead(r.threads, [&](int t) {
        const size_t blocks = floats / 16;
        const size_t begin = blocks * size_t(t) / size_t(r.threads) * 16,
                     end = blocks * size_t(t + 1) / size_t(r.threads) * 16;
        size_t read = 0;
        gSink = gSink + sum(buffer.get() + begin, end - begin, streams, read);
        return read;
      });
      if (gbs > best) {
        best = gbs;
        r.streamsPerThread = streams;
      }
    }
  r.gbPerSecond = best;
  return r;
}

ReadBandwidth measureReadBandwidth(int threads, const std::vector<MemorySpan> &spans, int passes) {
  ReadBandwidth r;
  r.threads = std::max(1, threads);
  size_t total = 0;
  for (const MemorySpan &s : spans) total += s.bytes;
  r.bufferMiB = double(total) / double(1 << 20);
  if (total < 64) return r; // nothing to time
  const SumFn sum = widestSum();
  double best = 0;
  for (int pass = 0; pass < std::max(1, passes); ++pass)
    best = std::max(best, timedRead(r.threads, [&](int t) {
      size_t read = 0; // thread t reads its share of every span, as decoding's GEMMs split them
      float kept = 0;
      for (const MemorySpan &s : spans) {
        const size_t blocks = s.bytes / 64;
        const size_t begin = blocks * size_t(t) / size_t(r.threads) * 16,
                     end = blocks * size_t(t + 1) / size_t(r.threads) * 16;
        size_t n = 0;
        kept += sum(static_cast<const float *>(s.data) + begin, end - begin, 1, n);
        read += n;
      }
      gSink = gSink + kept;
      return read;
    }));
  r.gbPerSecond = best;
  return r;
}

} // namespace nnc::runtime
